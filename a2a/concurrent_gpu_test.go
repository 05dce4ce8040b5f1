package a2a_test

// GPU regression tests that use the library the way a service does:
// memory helpers, token counts changing every case, operations issued at
// once, several Comms per process driven from their own goroutines, and a
// peer that closes while others are inside an operation.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func init() {
	scenarios["upload-race"] = workerUploadRace
	scenarios["close-during-op"] = workerCloseDuringOp
	scenarios["comms-at-once"] = workerCommsAtOnce
}

// Environment of the comms-at-once scenario.
const (
	envComms = "ULYSSES_TEST_COMMS"   // Comms per process
	envSMs   = "ULYSSES_TEST_NUM_SMS" // Config.NumSMs of each
)

// randomCase draws a case every rank draws alike from (seed, i): uneven
// and zero token counts up to maxTokens a rank, 1..8 heads a rank; about
// half the cases with more than one head a rank have 1..world-1 heads
// fewer, which the world size does not divide (the general kernels).
func randomCase(world int, dt a2a.DType, seed, i uint64, maxTokens int) check.Case {
	rng := rand.New(rand.NewPCG(seed, i))
	tokens := make([]int, world)
	for r := range tokens {
		if rng.IntN(6) > 0 {
			tokens[r] = rng.IntN(maxTokens + 1)
		}
	}
	dims := []int{64, 72, 128}
	heads := world * (1 + rng.IntN(8))
	if heads > world {
		heads -= unevenHeads(rng, world)
	}
	return check.Case{
		Name: fmt.Sprintf("case#%d", i), Batch: 1 + rng.IntN(2), Tokens: tokens,
		Heads: heads, HeadDim: dims[rng.IntN(len(dims))], DType: dt,
	}
}

// unevenHeads is how many heads fewer than a multiple of world (above
// world) randomCase takes: 0 for half the cases, else 1..world-1.
func unevenHeads(rng *rand.Rand, world int) int {
	if world < 2 || rng.IntN(2) == 0 {
		return 0
	}
	return 1 + rng.IntN(world-1)
}

// randomCase's heads: at least one a rank, at most largestCase's, and
// both divisible and not among them.
func TestRandomCaseHeads(t *testing.T) {
	for world := 1; world <= a2a.MaxWorldSize; world++ {
		uneven := 0
		for i := range uint64(200) {
			cs := randomCase(world, a2a.BFloat16, 3, i, 8)
			require.GreaterOrEqual(t, cs.Heads, world)
			require.LessOrEqual(t, cs.Heads*cs.HeadDim*cs.Batch, largestCase(world, a2a.BFloat16, 8).Heads*128*2)
			if cs.Heads%world != 0 {
				uneven++
			}
		}
		if world > 1 {
			assert.Greater(t, uneven, 20, "world %d", world)
			assert.Less(t, uneven, 180, "world %d", world)
		}
	}
}

// largestCase is the biggest case randomCase can draw.
func largestCase(world int, dt a2a.DType, maxTokens int) check.Case {
	tokens := make([]int, world)
	for r := range tokens {
		tokens[r] = maxTokens
	}
	return check.Case{Name: "largest", Batch: 2, Tokens: tokens, Heads: 8 * world, HeadDim: 128, DType: dt}
}

func uploadCases() int {
	if testing.Short() {
		return 150
	}
	return 1000
}

// workerUploadRace does exactly what a user does: SetRankTokens, Upload the
// input with the Device helper, the operation at once, then Sync and
// Download the view, with new token counts every case. Before the fix,
// uploads and token counts could land after the kernel read them.
func workerUploadRace(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	const maxTokens = 300
	for _, mode := range []struct {
		dt     a2a.DType
		single bool
		mover  a2a.Mover
	}{
		{a2a.BFloat16, false, a2a.MoverKernels}, {a2a.Float8E4M3, false, a2a.MoverKernels}, {a2a.BFloat16, true, a2a.MoverKernels},
		{a2a.BFloat16, false, a2a.MoverCopyEngines}, {a2a.BFloat16, true, a2a.MoverCopyEngines},
	} {
		big := largestCase(rk.World, mode.dt, maxTokens)
		comm, err := joinFor(rk, ex, mode.dt, []check.Case{big}, mode.single, withMover(mode.mover))
		if err != nil {
			return err
		}
		err = uploadRace(comm, big, mode.single)
		if cerr := comm.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%v single-buffer=%v %v: %w", mode.dt, mode.single, mode.mover, err)
		}
		fmt.Printf("PASS %v single-buffer=%v %v: %d cases uploaded and run at once\n", mode.dt, mode.single, mode.mover, uploadCases())
	}
	return nil
}

func uploadRace(comm *a2a.Comm, big check.Case, single bool) error {
	dev := comm.Device()
	s := big.Shape()
	x, err := dev.Alloc([4]int{1, 1, 1, s.GatheredBytes() / s.ElemSize}, big.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	y, err := dev.Alloc(x.Shape, big.DType)
	if err != nil {
		return err
	}
	defer dev.Free(y)
	rank := comm.Rank()
	for i := 0; i < uploadCases(); i++ {
		cs := randomCase(comm.WorldSize(), big.DType, 0x0b10ad, uint64(i), 300)
		d, err := check.MakeData(cs, uint64(i)+7, rank)
		if err != nil {
			return err
		}
		if err := comm.SetRankTokens(cs.Tokens); err != nil {
			return err
		}
		s := cs.Shape()
		local := [4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}
		_, mine := a2a.HeadRange(cs.Heads, s.World(), rank)
		shard := [4]int{cs.Batch, s.TotalTokens(), mine, cs.HeadDim}
		var out a2a.Tensor
		var want []byte
		switch i % 3 {
		case 0:
			in := a2a.Tensor{Ptr: x.Ptr, Shape: local, DType: cs.DType}
			if err = dev.Upload(in, d.X); err == nil {
				out, err = comm.SendRecvHeads(in)
			}
			want = d.Shard
		case 1:
			in := a2a.Tensor{Ptr: y.Ptr, Shape: shard, DType: cs.DType}
			if err = dev.Upload(in, d.Shard); err == nil {
				out, err = gatherHeadsOf(comm, cs.Heads, in)
			}
			want = d.X
		case 2:
			in := a2a.Tensor{Ptr: x.Ptr, Shape: local, DType: cs.DType}
			if err = dev.Upload(in, d.X); err == nil {
				out, err = comm.AllGather(in)
			}
			want = d.Gathered
		}
		if err != nil {
			return fmt.Errorf("%v: %w", cs, err)
		}
		if err := comm.Sync(); err != nil {
			return fmt.Errorf("%v: %w", cs, err)
		}
		got, err := dev.Download(out)
		if err != nil {
			return err
		}
		if err := check.Compare(fmt.Sprintf("%v op %d on rank %d", cs, i%3, rank), got, want); err != nil {
			return err
		}
		// Poison the view's region: the next op that writes it must write it all.
		if err := dev.Fill(comm.Buffer(), byte(0xA5+i)); err != nil {
			return err
		}
	}
	return nil
}

// TestUploadThenOperate: operations issued right after Upload and
// SetRankTokens read the new bytes and counts (double and single buffer;
// one rank per GPU and two ranks on one GPU).
func TestUploadThenOperate(t *testing.T) {
	info := requireGPU(t)
	t.Run("rank-per-gpu", func(t *testing.T) { runGroup(t, "upload-race", 2, nil) })
	t.Run("same-gpu", func(t *testing.T) { runGroup(t, "upload-race", 2, []int{0, 0}) })
	if len(info.Devices) < 2 {
		t.Log("one GPU: rank-per-gpu shares it too")
	}
}

// workerCloseDuringOp: the last rank closes its Comm while the others are
// inside an operation it never joins: each of the three, HeadAllGather and
// a packed SendRecvHeads of two tensors (the general kernels), in both
// buffer modes, moved by the kernels and by the copy engines. The others
// must get an error within the timeout bound, never a result.
func workerCloseDuringOp(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	const timeout = 4 * time.Second
	last := rk.World - 1
	for _, mode := range []struct {
		single bool
		mover  a2a.Mover
	}{{false, a2a.MoverKernels}, {true, a2a.MoverKernels}, {false, a2a.MoverCopyEngines}, {true, a2a.MoverCopyEngines}} {
		single := mode.single
		for op := 0; op < 5; op++ {
			cs := smallCase(rk.World, a2a.BFloat16)
			packed := cs
			packed.Tensors = 2
			comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs, packed}, single, withMover(mode.mover))
			if err != nil {
				return err
			}
			if err := comm.SetTimeout(timeout); err != nil {
				return err
			}
			if err := check.Run(comm, cs, uint64(op)); err != nil {
				return err
			}
			if err := rendezvous(ex, "ran"); err != nil {
				return err
			}
			what := fmt.Sprintf("single-buffer=%v %v op %d", single, mode.mover, op)
			if rk.Rank == last {
				// The others close as soon as they have their error, which
				// is the goodbye this Close waits for: it must not time out.
				time.Sleep(300 * time.Millisecond)
				start := time.Now()
				err := comm.Close()
				fmt.Printf("%s: rank %d closed in %v: %v\n", what, rk.Rank, time.Since(start).Round(time.Millisecond), err)
				if err != nil {
					return fmt.Errorf("%s: Close of the rank that left: %w", what, err)
				}
			} else {
				err := opAgainstClosedPeer(comm, cs, op, timeout)
				comm.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				fmt.Printf("%s: rank %d got its error\n", what, rk.Rank)
			}
			if err := rendezvous(ex, "closed"); err != nil {
				return err
			}
		}
	}
	return nil
}

func opAgainstClosedPeer(comm *a2a.Comm, cs check.Case, op int, timeout time.Duration) error {
	dev := comm.Device()
	s := cs.Shape()
	rank := comm.Rank()
	d, err := check.MakeData(cs, 3, rank)
	if err != nil {
		return err
	}
	in, err := uploadNew(dev, [4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}, cs.DType, d.X)
	if err != nil {
		return err
	}
	defer dev.Free(in)
	_, mine := a2a.HeadRange(cs.Heads, s.World(), rank)
	sh, err := uploadNew(dev, [4]int{cs.Batch, s.TotalTokens(), mine, cs.HeadDim}, cs.DType, d.Shard)
	if err != nil {
		return err
	}
	defer dev.Free(sh)
	start := time.Now()
	switch op {
	case 0:
		_, err = comm.SendRecvHeads(in)
	case 1:
		_, err = gatherHeadsOf(comm, cs.Heads, sh)
	case 2:
		_, err = comm.AllGather(in)
	case 3:
		_, err = comm.HeadAllGather(cs.Heads, sh)
	case 4:
		err = comm.SendRecvHeadsPacked(make([]a2a.Tensor, 2), []a2a.Tensor{in, in})
	}
	if err == nil {
		err = comm.Sync()
	}
	took := time.Since(start)
	fmt.Printf("rank %d: operation with a closed peer returned after %v: %v\n", rank, took.Round(time.Millisecond), err)
	switch {
	case err == nil:
		return errors.New("operation completed although a peer closed without joining it")
	case !errors.Is(err, a2a.ErrPeerClosed) && !errors.Is(err, a2a.ErrTimeout):
		return fmt.Errorf("got %v, want ErrPeerClosed or ErrTimeout", err)
	case took > timeout*3/2+time.Second:
		return fmt.Errorf("error came after %v, over the %v bound", took, timeout)
	}
	return nil
}

// uploadNew allocates a tensor of shape on dev holding b.
func uploadNew(dev *a2a.Device, shape [4]int, dt a2a.DType, b []byte) (a2a.Tensor, error) {
	t, err := dev.Alloc(shape, dt)
	if err != nil {
		return t, err
	}
	if err := dev.Upload(t, b); err != nil {
		dev.Free(t)
		return a2a.Tensor{}, err
	}
	return t, nil
}

// TestPeerClosesDuringOperation: see workerCloseDuringOp.
func TestPeerClosesDuringOperation(t *testing.T) {
	requireGPU(t)
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) { runGroup(t, "close-during-op", world, nil) })
	}
}

func opsPerComm() int {
	if testing.Short() {
		return 300
	}
	return 2000
}

var concurrentDTypes = []a2a.DType{a2a.BFloat16, a2a.Float8E4M3, a2a.Float16, a2a.Float8E5M2}

// workerCommsAtOnce holds several Comms (one per dtype, every second one
// moving bytes with the copy engines beside the others' kernels) and drives each
// from its own goroutine through check.Run (uploads, fills, downloads, new
// token counts, every operation and its Into form) and short back-to-back
// runs with random host delays of 0-3 ms before each read. Part way
// through, the main goroutine joins one more Comm and checks it while the
// others run.
func workerCommsAtOnce(rk launch.Rank) error {
	k, _ := strconv.Atoi(os.Getenv(envComms))
	sms, _ := strconv.Atoi(os.Getenv(envSMs))
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	// Most cases are small (few active blocks, many operations); every
	// tenth round is large enough that every block of every Comm copies
	// and signals at once.
	const maxTokens, bigTokens = 96, 1536
	comms := make([]*a2a.Comm, 0, k+1)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	join := func(dt a2a.DType, mover a2a.Mover) (*a2a.Comm, error) {
		c, err := joinConfig(rk, ex, dt, largestCase(rk.World, dt, bigTokens), sms, mover)
		if err == nil {
			comms = append(comms, c)
		}
		return c, err
	}
	for i := 0; i < k; i++ {
		mover := a2a.MoverKernels
		if i%2 == 1 {
			mover = a2a.MoverCopyEngines // beside the kernels' Comms
		}
		if _, err := join(concurrentDTypes[i%len(concurrentDTypes)], mover); err != nil {
			return err
		}
	}
	if rk.Rank == 0 {
		fmt.Printf("occupancy: %s\n", a2a.DebugOccupancy(comms[0]))
	}
	var wg sync.WaitGroup
	errs := make([]error, k)
	ops := make([]int, k)
	third := make(chan struct{})
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops[i], errs[i] = driveComm(comms[i], uint64(i), maxTokens, bigTokens, third, i == 0)
		}()
	}
	// A Comm made while the others are in the middle of their operations.
	<-third
	late, err := join(a2a.BFloat16, a2a.MoverKernels)
	if err == nil {
		for i := 0; i < 5 && err == nil; i++ {
			err = check.Run(late, randomCase(rk.World, a2a.BFloat16, 99, uint64(i), maxTokens), uint64(i))
		}
	}
	wg.Wait()
	all := append(errs, err)
	if err := errors.Join(all...); err != nil {
		for i, c := range comms {
			fmt.Printf("comm %d (%v, %v): %s", i, c.Config().DType, c.Config().Mover, a2a.DebugDump(c, 16))
		}
		return err
	}
	fmt.Printf("rank %d: %d Comms at once, NumSMs %d: %v checked operations each, 0 mismatches, 0 timeouts\n", rk.Rank, k, sms, ops)
	return nil
}

func driveComm(comm *a2a.Comm, id uint64, maxTokens, bigTokens int, third chan struct{}, signal bool) (int, error) {
	dt := comm.Config().DType
	ops := 0
	for round := uint64(0); ops < opsPerComm(); round++ {
		if signal && ops >= opsPerComm()/3 {
			close(third)
			signal = false
		}
		tokens := maxTokens
		if round%10 == 9 {
			tokens = bigTokens
		}
		cs := randomCase(comm.WorldSize(), dt, id, round, tokens)
		if err := check.Run(comm, cs, round); err != nil {
			return ops, fmt.Errorf("comm %d (%v) round %d %v: %w", id, dt, round, cs, err)
		}
		if err := check.BackToBack(comm, cs, 6, 3*time.Millisecond, round); err != nil {
			return ops, fmt.Errorf("comm %d (%v) round %d back-to-back %v: %w", id, dt, round, cs, err)
		}
		ops += 9 + 6
	}
	if signal {
		close(third)
	}
	return ops, nil
}

// joinConfig joins a Comm sized for big with NumSMs sms, mover and a 5 s
// timeout.
func joinConfig(rk launch.Rank, ex a2a.Exchanger, dt a2a.DType, big check.Case, sms int, mover a2a.Mover) (*a2a.Comm, error) {
	return joinFor(rk, ex, dt, []check.Case{big}, false, withMover(mover), func(c *a2a.Config) {
		c.NumSMs = sms
		c.Timeout = 5 * time.Second
	})
}

// TestCommsAtOnce: 2, 3 and 4 Comms per process, each used from its own
// goroutine, on all SMs and on 32 each, one process per GPU and two
// processes on one GPU: every output checked, no timeout.
func TestCommsAtOnce(t *testing.T) {
	requireGPU(t)
	for _, k := range []int{2, 3, 4} {
		for _, sms := range []int{0, 32} {
			for _, place := range []struct {
				name    string
				devices []int
			}{{"rank-per-gpu", nil}, {"same-gpu", []int{0, 0}}} {
				t.Run(fmt.Sprintf("comms%d/sms%d/%s", k, sms, place.name), func(t *testing.T) {
					runGroup(t, "comms-at-once", 2, place.devices,
						envComms+"="+strconv.Itoa(k), envSMs+"="+strconv.Itoa(sms))
				})
			}
		}
	}
}
