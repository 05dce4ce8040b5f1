package a2a_test

// A process per rank over the stub driver, the buffers shared as file
// descriptors, while processes of the same user that never prove the key
// crowd rank 0's socket: every rank's Connect still succeeds within a
// second, round after round.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fdshare"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/launch"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func init() { scenarios["share-crowded"] = crowdedWorker }

// Rounds of the crowded scenario, and the crowd on rank 0's socket: 256
// connections that send a hello and stall, dialling again once evicted,
// and 64 that connect and say nothing.
const (
	crowdedRounds  = 15
	crowdStallers  = 256
	crowdSilent    = 64
	crowdedConnect = time.Second // times testutil.Slowdown()
)

// TestFakeSharingCrowded: groups of 2 and of 4 processes form 15 times
// each while rank 0's socket is crowded; every Connect takes under a
// second.
func TestFakeSharingCrowded(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			runGroup(t, "share-crowded", world, nil, driver.EnvLibrary+"="+lib, fakecuda.EnvDevices+"=2")
		})
	}
}

// crowdedWorker is one rank of share-crowded.
func crowdedWorker(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	var slowest time.Duration
	for round := range crowdedRounds {
		took, err := crowdedRound(rk, ex)
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		slowest = max(slowest, took)
	}
	fmt.Printf("rank %d: %d rounds, slowest Connect %v\n", rk.Rank, crowdedRounds, slowest)
	return nil
}

// crowdedRound forms a group, rank 0 crowding its own socket from the
// moment its handle exists, and returns how long Connect took.
func crowdedRound(rk launch.Rank, ex a2a.Exchanger) (time.Duration, error) {
	c, err := a2a.New(a2a.Config{Rank: rk.Rank, WorldSize: rk.World, Device: rk.Device, MaxTokens: 16, HiddenDim: 64,
		DType: a2a.BFloat16, Sharing: a2a.SharingFD, Timeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if rk.Rank == 0 {
		h, err := handle.Decode(c.Handle())
		if err != nil {
			return 0, errors.Join(err, c.Close())
		}
		path := fdshare.SocketPath(h.FDDir(), h.ID[:])
		crowd, stop := context.WithCancel(ctx)
		stallers := testutil.Crowd(crowd, path, crowdStallers, testutil.RedialHello, fdshare.Hello())
		silent := testutil.Crowd(crowd, path, crowdSilent, testutil.HeldSilent, nil)
		defer func() { stop(); stallers(); silent() }()
	}
	handles, err := ex.AllGather(ctx, c.Handle())
	if err != nil {
		return 0, errors.Join(err, c.Close())
	}
	start := time.Now()
	err = c.Connect(handles)
	took := time.Since(start)
	if limit := crowdedConnect * testutil.Slowdown(); err == nil && took > limit {
		err = fmt.Errorf("rank %d: Connect took %v, more than %v", rk.Rank, took, limit)
	}
	if err == nil {
		_, err = ex.AllGather(ctx, nil) // every rank connected before any closes
	}
	return took, errors.Join(err, c.Close())
}
