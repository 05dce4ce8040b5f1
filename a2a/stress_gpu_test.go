package a2a_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func init() { scenarios["stress"] = workerStress }

// envStressSeconds sets how long the stress test runs at each world size
// (default 25 s, so 75 s over world sizes 2, 3 and 4; 5 s with -short).
const envStressSeconds = "ULYSSES_STRESS_SECONDS"

var stressDTypes = []a2a.DType{a2a.BFloat16, a2a.Float16, a2a.Float8E4M3, a2a.Float8E5M2}

// stressCase draws a random case that every rank draws alike from round's
// seed: shapes, uneven and zero token counts, dtypes and misalignment vary.
func stressCase(world int, round uint64) check.Case {
	rng := rand.New(rand.NewPCG(0x5eed, round))
	tokens := make([]int, world)
	for r := range tokens {
		if rng.IntN(5) > 0 {
			tokens[r] = rng.IntN(48)
		}
	}
	dts := stressDTypes
	dims := []int{3, 8, 64, 72, 128}
	return check.Case{
		Name:     fmt.Sprintf("stress#%d", round),
		Batch:    1 + rng.IntN(4),
		Tokens:   tokens,
		Heads:    world * (1 + rng.IntN(4)),
		HeadDim:  dims[rng.IntN(len(dims))],
		DType:    dts[rng.IntN(len(dts))],
		Misalign: rng.IntN(3) / 2,
	}
}

// workerStress runs random cases until rank 0 says stop: each round every
// rank checks a random case (every operation against the reference) and a
// short back-to-back run with a per-rank random delay, on a Comm of the
// case's width (one Comm per width, sized for the largest case).
func workerStress(rk launch.Rank) error {
	secs, _ := strconv.Atoi(os.Getenv(envStressSeconds))
	if secs <= 0 {
		secs = 25
		if testing.Short() {
			secs = 5
		}
	}
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	// The largest case: B=4, 48 tokens a rank, 4 heads a rank, D=128.
	big := check.Case{Batch: 4, Tokens: make([]int, rk.World), Heads: 4 * rk.World, HeadDim: 128, DType: a2a.BFloat16}
	for r := range big.Tokens {
		big.Tokens[r] = 48
	}
	comms := map[a2a.DType]*a2a.Comm{}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	for _, dt := range stressDTypes {
		big.DType = dt
		c, err := joinFor(rk, ex, dt, []check.Case{big}, false)
		if err != nil {
			return err
		}
		comms[dt] = c
	}
	delays := rand.New(rand.NewPCG(uint64(rk.Rank), 99))
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	rounds, ops := 0, 0
	for round := uint64(1); ; round++ {
		// Rank 0 decides, for everyone, whether to go on.
		goOn := []byte{0}
		if time.Now().Before(deadline) {
			goOn[0] = 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		votes, err := ex.AllGather(ctx, goOn)
		cancel()
		if err != nil {
			return err
		}
		if votes[0][0] == 0 {
			break
		}
		cs := stressCase(rk.World, round)
		comm := comms[cs.DType]
		time.Sleep(time.Duration(delays.Int64N(int64(200 * time.Microsecond))))
		if err := check.Run(comm, cs, round); err != nil {
			return fmt.Errorf("round %d %v: %w", round, cs, err)
		}
		n := 10 + int(round%20)
		if err := check.BackToBack(comm, cs, n, 200*time.Microsecond, round); err != nil {
			return fmt.Errorf("round %d back-to-back %v: %w", round, cs, err)
		}
		rounds++
		ops += 9 + n
	}
	fmt.Printf("stress: rank %d: %d rounds, %d checked operations, 0 mismatches\n", rk.Rank, rounds, ops)
	return nil
}

// TestStress runs random operations, shapes, dtypes, token counts and
// per-rank delays for 25 s at each of world sizes 2, 3 and 4 (75 s in all; 5 s
// each with -short), every output checked against the CPU reference.
func TestStress(t *testing.T) {
	requireGPU(t)
	for _, world := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			runGroup(t, "stress", world, nil)
		})
	}
}
