package a2a_test

// GPU regression tests that use the library the way a service does:
// memory helpers, token counts changing every case, operations issued at
// once, several Comms per process driven from their own goroutines, and a
// peer that closes while others are inside an operation.

import (
	"bytes"
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
	"github.com/ulysses-go/ulysses/a2a/ref"
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
	envComms = "ULYSSES_TEST_COMMS"     // Comms per process
	envSMs   = "ULYSSES_TEST_COMMS_SMS" // Config.NumSMs of each
)

// envWire is "1" when the comms-at-once and close-during-op scenarios may
// put Comms on the fp8 wire (wireEnv).
const envWire = "ULYSSES_TEST_WIRE"

// wireEnv is the envWire setting for the GPUs of info: "1" when every one
// has compute capability 9.0 or later, which the fp8 wire needs; else the
// scenarios run their exact Comms only, as the log says.
func wireEnv(t *testing.T, info a2a.SystemInfo) string {
	if why := noWire(info); why != "" {
		t.Logf("%s: no Comm takes the fp8 wire", why)
		return envWire + "=0"
	}
	return envWire + "=1"
}

// wireFromEnv reports whether envWire lets the scenario use the fp8 wire.
func wireFromEnv() bool { return os.Getenv(envWire) == "1" }

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
// buffer modes, moved by the kernels and by the copy engines, and (under
// envWire) by the kernels over the e4m3 wire, staged. The others must get
// an error within the timeout bound, never a result; over the wire the
// decode after the failed exchange must leave the peers' rows of the
// outputs as poisonHalves left them.
func workerCloseDuringOp(rk launch.Rank) error {
	restore := a2a.SetWireDirectBytes(1) // the wire stages every operation: exchange, then decode
	defer restore()
	// Each case joins and closes a Comm of its own: holding the device
	// keeps its context between them (about 0.5 s each to make and destroy
	// again otherwise, the bulk of this test's time).
	held, err := holdDevice(rk)
	if err != nil {
		return err
	}
	defer held.Close()
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	const timeout = 4 * time.Second
	last := rk.World - 1
	type closeMode struct {
		single bool
		mover  a2a.Mover
		wire   a2a.Wire
	}
	modes := []closeMode{
		{false, a2a.MoverKernels, a2a.WireExact}, {true, a2a.MoverKernels, a2a.WireExact},
		{false, a2a.MoverCopyEngines, a2a.WireExact}, {true, a2a.MoverCopyEngines, a2a.WireExact},
	}
	if wireFromEnv() {
		modes = append(modes, closeMode{false, a2a.MoverKernels, a2a.WireE4M3}, closeMode{true, a2a.MoverKernels, a2a.WireE4M3})
	}
	for _, mode := range modes {
		single := mode.single
		for op := 0; op < 5; op++ {
			cs := smallCase(rk.World, a2a.BFloat16)
			packed := cs
			packed.Tensors = 2
			comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs, packed}, single, withMover(mode.mover), withWire(mode.wire))
			if err != nil {
				return err
			}
			if err := comm.SetTimeout(timeout); err != nil {
				return err
			}
			if err := check.Run(comm, cs, uint64(op)); err != nil {
				return err
			}
			if mode.wire.Lossy() {
				if err := poisonHalves(comm, cs); err != nil {
					return err
				}
			}
			if err := rendezvous(ex, "ran"); err != nil {
				return err
			}
			what := fmt.Sprintf("single-buffer=%v %v wire=%v op %d", single, mode.mover, mode.wire, op)
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
				views, err := opAgainstClosedPeer(comm, cs, op, timeout)
				kept := 0
				if err == nil && mode.wire.Lossy() {
					kept, err = decodeWroteNothing(comm, cs, op, views)
				}
				comm.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				if mode.wire.Lossy() {
					fmt.Printf("%s: rank %d got its error; the decode left the %d bytes of peers' rows poisoned\n", what, rk.Rank, kept)
				} else {
					fmt.Printf("%s: rank %d got its error\n", what, rk.Rank)
				}
			}
			if err := rendezvous(ex, "closed"); err != nil {
				return err
			}
		}
	}
	return nil
}

// opAgainstClosedPeer runs operation op of cs (0 SendRecvHeads, 1
// GatherHeads, 2 AllGather, 3 HeadAllGather, 4 SendRecvHeadsPacked of two
// tensors) with a peer that never joins it and checks that it fails, in
// time, with ErrPeerClosed or ErrTimeout. It returns the operation's
// views, which hold no result (none when the call itself failed, before
// any launch).
func opAgainstClosedPeer(comm *a2a.Comm, cs check.Case, op int, timeout time.Duration) ([]a2a.Tensor, error) {
	dev := comm.Device()
	s := cs.Shape()
	rank := comm.Rank()
	d, err := check.MakeData(cs, 3, rank)
	if err != nil {
		return nil, err
	}
	in, err := uploadNew(dev, [4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}, cs.DType, d.X)
	if err != nil {
		return nil, err
	}
	defer dev.Free(in)
	_, mine := a2a.HeadRange(cs.Heads, s.World(), rank)
	sh, err := uploadNew(dev, [4]int{cs.Batch, s.TotalTokens(), mine, cs.HeadDim}, cs.DType, d.Shard)
	if err != nil {
		return nil, err
	}
	defer dev.Free(sh)
	views := make([]a2a.Tensor, 1, 2)
	start := time.Now()
	switch op {
	case 0:
		views[0], err = comm.SendRecvHeads(in)
	case 1:
		views[0], err = gatherHeadsOf(comm, cs.Heads, sh)
	case 2:
		views[0], err = comm.AllGather(in)
	case 3:
		views[0], err = comm.HeadAllGather(cs.Heads, sh)
	case 4:
		views = views[:2]
		err = comm.SendRecvHeadsPacked(views, []a2a.Tensor{in, in})
	}
	if err == nil {
		err = comm.Sync()
	} else {
		views = nil
	}
	took := time.Since(start)
	fmt.Printf("rank %d: operation with a closed peer returned after %v: %v\n", rank, took.Round(time.Millisecond), err)
	switch {
	case err == nil:
		return nil, errors.New("operation completed although a peer closed without joining it")
	case !errors.Is(err, a2a.ErrPeerClosed) && !errors.Is(err, a2a.ErrTimeout):
		return nil, fmt.Errorf("got %v, want ErrPeerClosed or ErrTimeout", err)
	case took > timeout*3/2+time.Second:
		return nil, fmt.Errorf("error came after %v, over the %v bound", took, timeout)
	}
	return views, nil
}

// wirePoison is what poisonHalves writes into a Comm's outputs.
const wirePoison = 0xC3

// poisonHalves fills the outputs of both halves of comm's buffer with
// wirePoison: the last operation's half, then, after one AllGather of cs
// on zeros (every rank calls it), that operation's half. The next
// operation writes its outputs into poison whichever half it takes (with
// a single buffer both fills hit the one half).
func poisonHalves(comm *a2a.Comm, cs check.Case) error {
	dev := comm.Device()
	if err := dev.Fill(comm.Buffer(), wirePoison); err != nil {
		return err
	}
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[comm.Rank()], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	if err := dev.Fill(x, 0); err != nil {
		return err
	}
	if _, err := comm.AllGather(x); err != nil {
		return err
	}
	if err := comm.Sync(); err != nil {
		return err
	}
	return dev.Fill(comm.Buffer(), wirePoison)
}

// decodeWroteNothing checks the views of a staged wire operation op of cs
// that failed (as opAgainstClosedPeer numbers them), written into the
// poison of poisonHalves: every byte of a peer's row, which reaches the
// output only through the decode, must still be poison (the exchange may
// have written this rank's own rows). It reads the views straight off the
// device, on a stream of its own (the memory helpers refuse a failed
// Comm's buffer; the Sync that failed waited for both launches), and
// returns how many bytes it checked.
func decodeWroteNothing(comm *a2a.Comm, cs check.Case, op int, views []a2a.Tensor) (int, error) {
	if len(views) == 0 {
		return 0, errors.New("the operation failed as it was called, before any launch: no decode to check")
	}
	peer, err := peerBytes(cs.Shape(), comm.Rank(), op)
	if err != nil {
		return 0, err
	}
	ts, err := a2a.OpenTestStream(comm.Device())
	if err != nil {
		return 0, err
	}
	defer ts.Close()
	checked := 0
	for k, v := range views {
		if v.Bytes() != int64(len(peer)) {
			return checked, fmt.Errorf("view %d of the failed operation: %d bytes, want %d", k, v.Bytes(), len(peer))
		}
		got, err := ts.Pinned(len(peer))
		if err != nil {
			return checked, err
		}
		if err := ts.Download(got, v); err != nil {
			return checked, err
		}
		if err := ts.Sync(); err != nil {
			return checked, err
		}
		for i, p := range peer {
			if p == 0 {
				continue
			}
			if got[i] != wirePoison {
				return checked, fmt.Errorf("view %d byte %d, of a peer's row, is %#x, not the poison %#x: the decode wrote after the exchange failed", k, i, got[i], wirePoison)
			}
			checked++
		}
	}
	if checked == 0 {
		return 0, errors.New("no byte of the failed operation's outputs comes from a peer: nothing to check")
	}
	return checked, nil
}

// peerBytes marks with 1 the bytes of rank's output of operation op (as
// opAgainstClosedPeer numbers them; each packed output alike) that hold
// other ranks' rows: the CPU reference run on inputs of 1s from the peers
// and 0s from rank.
func peerBytes(s ref.Shape, rank, op int) ([]byte, error) {
	inBytes, outBytes, run := s.RankInputBytes, s.HeadShardBytesFor(rank), ref.SendRecvHeadsFor // ops 0 and 4
	switch op {
	case 1:
		inBytes, outBytes, run = s.HeadShardBytesFor, s.RankInputBytes(rank), ref.GatherHeadsFor
	case 2:
		outBytes, run = s.GatheredBytes(), ref.AllGatherFor
	case 3:
		inBytes, outBytes, run = s.HeadShardBytesFor, s.GatheredBytes(), ref.HeadAllGatherFor
	}
	in := make([][]byte, s.World())
	for r := range in {
		var from byte
		if r != rank {
			from = 1
		}
		in[r] = bytes.Repeat([]byte{from}, inBytes(r))
	}
	mark := make([]byte, outBytes)
	return mark, run(s, rank, in, mark)
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
	wire := wireEnv(t, requireGPU(t))
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) { runGroup(t, "close-during-op", world, nil, wire) })
	}
}

func opsPerComm() int {
	if testing.Short() {
		return 300
	}
	return 2000
}

var concurrentDTypes = []a2a.DType{a2a.BFloat16, a2a.Float8E4M3, a2a.Float16, a2a.Float8E5M2}

// commsAtOnceWire is the wire of the comms-at-once scenario's Comm i (k
// for the late one) of dt and mover, when wire allows the fp8 wire: the
// kernels' 16-bit Comms after the first cross as e4m3 (fp16) or e5m2
// (bf16), so Comm 0 (bf16) keeps the exact kernels, Comm 2 (fp16) takes
// e4m3 and the late Comm (bf16) e5m2; the copy engines' (fp8) Comms, which
// cannot convert, stay exact.
func commsAtOnceWire(i int, dt a2a.DType, mover a2a.Mover, wire bool) a2a.Wire {
	switch {
	case !wire || i == 0 || mover != a2a.MoverKernels:
		return a2a.WireExact
	case dt == a2a.Float16:
		return a2a.WireE4M3
	case dt == a2a.BFloat16:
		return a2a.WireE5M2
	}
	return a2a.WireExact
}

// workerCommsAtOnce holds several Comms (one per dtype, every second one
// moving bytes with the copy engines beside the others' kernels, some of
// the kernels' on the fp8 wire, staged: commsAtOnceWire) and drives each
// from its own goroutine through check.Run (uploads, fills, downloads, new
// token counts, every operation and its Into form) and short back-to-back
// runs with random host delays of 0-3 ms before each read. Part way
// through, the main goroutine joins one more Comm and checks it while the
// others run.
func workerCommsAtOnce(rk launch.Rank) error {
	restore := a2a.SetWireDirectBytes(1) // the wire stages every operation: exchange, then decode
	defer restore()
	k, _ := strconv.Atoi(os.Getenv(envComms))
	sms, _ := strconv.Atoi(os.Getenv(envSMs))
	if k < 1 {
		return fmt.Errorf("comms at once: %s=%q, want at least 1", envComms, os.Getenv(envComms))
	}
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
	wire := wireFromEnv()
	join := func(dt a2a.DType, mover a2a.Mover) (*a2a.Comm, error) {
		w := commsAtOnceWire(len(comms), dt, mover, wire)
		c, err := joinConfig(rk, ex, dt, largestCase(rk.World, dt, bigTokens), sms, mover, withWire(w))
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
		c := comms[i] // read here: the late join appends to comms meanwhile
		go func() {
			defer wg.Done()
			ops[i], errs[i] = driveComm(c, uint64(i), maxTokens, bigTokens, third, i == 0)
		}()
	}
	// A Comm made while the others are in the middle of their operations.
	<-third
	late, err := join(a2a.BFloat16, a2a.MoverKernels)
	if err == nil {
		for i := 0; i < 5 && err == nil; i++ {
			cs := onWire(randomCase(rk.World, a2a.BFloat16, 99, uint64(i), maxTokens), late, uint64(i))
			err = check.Run(late, cs, uint64(i))
		}
	}
	wg.Wait()
	all := append(errs, err)
	wires := make([]string, len(comms))
	for i, c := range comms {
		wires[i] = c.Config().Wire.String()
	}
	if err := errors.Join(all...); err != nil {
		for i, c := range comms {
			fmt.Printf("comm %d (%v, %v, %v wire): %s", i, c.Config().DType, c.Config().Mover, c.Config().Wire, a2a.DebugDump(c, 16))
		}
		return err
	}
	fmt.Printf("rank %d: %d Comms at once, NumSMs %d, wires %v (the last joined late; fp8 wire staged): %v checked operations each, 0 mismatches, 0 timeouts\n",
		rk.Rank, k, sms, wires, ops)
	return nil
}

// onWire makes cs, the n-th case of comm, activation-like
// (check.Case.Narrow) when n is odd and comm's wire is lossy, so that half
// of such a Comm's cases keep most of their elements through fp8; on
// random bit patterns a row's largest element rounds most others to zero.
func onWire(cs check.Case, comm *a2a.Comm, n uint64) check.Case {
	cs.Narrow = comm.Config().Wire.Lossy() && n%2 == 1
	return cs
}

func driveComm(comm *a2a.Comm, id uint64, maxTokens, bigTokens int, third chan struct{}, signal bool) (int, error) {
	dt := comm.Config().DType
	ops := 0
	defer func() {
		if signal { // on every return, an error's too: the main goroutine waits for it
			close(third)
		}
	}()
	for round := uint64(0); ops < opsPerComm(); round++ {
		if signal && ops >= opsPerComm()/3 {
			close(third)
			signal = false
		}
		tokens := maxTokens
		if round%10 == 9 {
			tokens = bigTokens
		}
		cs := onWire(randomCase(comm.WorldSize(), dt, id, round, tokens), comm, round)
		if err := check.Run(comm, cs, round); err != nil {
			return ops, fmt.Errorf("comm %d (%v, %v wire) round %d %v: %w", id, dt, comm.Config().Wire, round, cs, err)
		}
		if err := check.BackToBack(comm, cs, 6, 3*time.Millisecond, round); err != nil {
			return ops, fmt.Errorf("comm %d (%v, %v wire) round %d back-to-back %v: %w", id, dt, comm.Config().Wire, round, cs, err)
		}
		ops += 9 + 6
	}
	return ops, nil
}

// joinConfig joins a Comm sized for big with NumSMs sms, mover and a 5 s
// timeout; opts adjust its Config further.
func joinConfig(rk launch.Rank, ex a2a.Exchanger, dt a2a.DType, big check.Case, sms int, mover a2a.Mover, opts ...func(*a2a.Config)) (*a2a.Comm, error) {
	opts = append([]func(*a2a.Config){withMover(mover), func(c *a2a.Config) {
		c.NumSMs = sms
		c.Timeout = 5 * time.Second
	}}, opts...)
	return joinFor(rk, ex, dt, []check.Case{big}, false, opts...)
}

// TestCommsAtOnce: 2, 3 and 4 Comms per process, each used from its own
// goroutine, some of them over the fp8 wire (commsAtOnceWire), on all SMs
// and on 32 each, one process per GPU and two processes on one GPU: every
// output checked, no timeout.
func TestCommsAtOnce(t *testing.T) {
	wire := wireEnv(t, requireGPU(t))
	for _, k := range []int{2, 3, 4} {
		for _, sms := range []int{0, 32} {
			for _, place := range []struct {
				name    string
				devices []int
			}{{"rank-per-gpu", nil}, {"same-gpu", []int{0, 0}}} {
				t.Run(fmt.Sprintf("comms%d/sms%d/%s", k, sms, place.name), func(t *testing.T) {
					runGroup(t, "comms-at-once", 2, place.devices,
						envComms+"="+strconv.Itoa(k), envSMs+"="+strconv.Itoa(sms), wire)
				})
			}
		}
	}
}

// holdDevice opens rk's device (its own, or the rank's default: rank
// modulo the GPUs), so that its context outlives the Comms the scenario
// makes one after another.
func holdDevice(rk launch.Rank) (*a2a.Device, error) {
	if rk.Device != nil {
		return a2a.OpenDevice(*rk.Device)
	}
	sys, err := a2a.System()
	if err != nil {
		return nil, err
	}
	if len(sys.Devices) == 0 {
		return nil, fmt.Errorf("rank %d: no GPU", rk.Rank)
	}
	return a2a.OpenDevice(rk.Rank % len(sys.Devices))
}
