package a2a_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func init() {
	scenarios["late-graph"] = workerLateGraph
}

// lateReplays is how many times lateReads replays each graph.
const lateReplays = 200

// lateKind is one kind of operation the late-read graphs hold: whether
// its heads divide among the ranks, whether it moves q, k and v at once,
// whether its input is a head shard ([B, T, H_r, D]) or a rank's tokens
// ([B, T_r, H, D]), which of a rank's check.Data is its output, and how
// it runs.
type lateKind struct {
	name    string
	uneven  bool // heads the world size does not divide
	packed  bool // three tensors; with tokens in, read out of one fused tensor
	shardIn bool
	want    func(check.Data) []byte
	run     func(on a2a.StreamOps, heads int, views, xs []a2a.Tensor) error
}

// input is kind k's input in d.
func (k lateKind) input(d check.Data) []byte {
	if k.shardIn {
		return d.Shard
	}
	return d.X
}

func dataX(d check.Data) []byte        { return d.X }
func dataShard(d check.Data) []byte    { return d.Shard }
func dataGathered(d check.Data) []byte { return d.Gathered }

// one adapts an operation of one tensor to lateKind.run.
func one(op func(on a2a.StreamOps, heads int, x a2a.Tensor) (a2a.Tensor, error)) func(a2a.StreamOps, int, []a2a.Tensor, []a2a.Tensor) error {
	return func(on a2a.StreamOps, heads int, views, xs []a2a.Tensor) error {
		var err error
		views[0], err = op(on, heads, xs[0])
		return err
	}
}

var lateKinds = []lateKind{
	{name: "SendRecvHeads", want: dataShard,
		run: one(func(on a2a.StreamOps, _ int, x a2a.Tensor) (a2a.Tensor, error) { return on.SendRecvHeads(x) })},
	{name: "GatherHeads", shardIn: true, want: dataX,
		run: one(func(on a2a.StreamOps, _ int, x a2a.Tensor) (a2a.Tensor, error) { return on.GatherHeads(x) })},
	{name: "AllGather", want: dataGathered,
		run: one(func(on a2a.StreamOps, _ int, x a2a.Tensor) (a2a.Tensor, error) { return on.AllGather(x) })},
	{name: "HeadAllGather", uneven: true, shardIn: true, want: dataGathered,
		run: one(func(on a2a.StreamOps, heads int, x a2a.Tensor) (a2a.Tensor, error) { return on.HeadAllGather(heads, x) })},
	{name: "SendRecvHeadsPacked", uneven: true, packed: true, want: dataShard,
		run: func(on a2a.StreamOps, _ int, views, xs []a2a.Tensor) error { return on.SendRecvHeadsPacked(views, xs) }},
	{name: "GatherHeadsPacked", uneven: true, packed: true, shardIn: true, want: dataX,
		run: func(on a2a.StreamOps, heads int, views, xs []a2a.Tensor) error {
			return on.GatherHeadsPacked(heads, views, xs)
		}},
}

// lateCase is kind k's shape on a group of world ranks: uneven tokens,
// 4 heads per rank (one more in all where the kind wants them uneven).
func lateCase(k lateKind, world int, dt a2a.DType) check.Case {
	tokens := make([]int, world)
	for r := range tokens {
		tokens[r] = 7 + 11*r
	}
	cs := check.Case{Name: k.name, Batch: 2, Tokens: tokens, Heads: 4 * world, HeadDim: 64, DType: dt}
	if k.uneven {
		cs.Heads++
	}
	if k.packed {
		cs.Tensors = 3
	}
	return cs
}

// lateCases are every kind's case, for the Comm's capacity.
func lateCases(world int, dt a2a.DType) []check.Case {
	var cases []check.Case
	for _, k := range lateKinds {
		cases = append(cases, lateCase(k, world, dt))
	}
	return cases
}

// latePrograms are the graphs lateReads captures: of 1, 2 and 3
// operations, each kind last once per length (the last one's views are
// the ones read after the replay).
func latePrograms() [][]lateKind {
	var programs [][]lateKind
	for n := 1; n <= 3; n++ {
		for i := range lateKinds {
			var p []lateKind
			for j := n - 1; j >= 0; j-- {
				p = append(p, lateKinds[(i+j)%len(lateKinds)])
			}
			programs = append(programs, p)
		}
	}
	return programs
}

// lateOp is one operation of a captured graph on one rank: its inputs,
// the views the capture returned, where the graph copies them right after
// the operation (kept), and where a kernel on another stream copies the
// last operation's views after the replay (late).
type lateOp struct {
	kind   lateKind
	cs     check.Case
	xs     []a2a.Tensor
	fused  a2a.Tensor // SendRecvHeadsPacked's one input allocation
	views  []a2a.Tensor
	kept   []a2a.Tensor
	late   []a2a.Tensor // the program's last operation only
	want   [][]byte     // this replay's expected outputs
	allocs []a2a.Tensor
}

// lateRank is what one rank needs to run lateReads.
type lateRank struct {
	c   *a2a.Comm
	tk  *a2a.TestKernels
	rng *rand.Rand
}

// newLateOp allocates op's inputs and output copies on rank's device;
// only the program's last operation (last) gets late copies.
func (lr *lateRank) newLateOp(k lateKind, last bool) (*lateOp, error) {
	dev, dt := lr.c.Device(), lr.c.Config().DType
	op := &lateOp{kind: k, cs: lateCase(k, lr.c.WorldSize(), dt)}
	d, err := check.MakeData(op.cs, 0, lr.c.Rank())
	if err != nil {
		return nil, err
	}
	n := max(op.cs.Tensors, 1)
	alloc := func(shape [4]int) (a2a.Tensor, error) {
		t, err := dev.Alloc(shape, dt)
		op.allocs = append(op.allocs, t)
		return t, err
	}
	shape := op.inputShape(lr.c.Rank())
	if k.packed && !k.shardIn {
		if op.fused, err = alloc(check.FusedShape(shape, n)); err != nil {
			return op, err
		}
		op.xs = check.FusedViews(op.fused.Ptr, shape, dt, n)
	}
	for range n {
		if op.fused.Ptr == 0 {
			x, err := alloc(shape)
			if err != nil {
				return op, err
			}
			op.xs = append(op.xs, x)
		}
		bytes := len(k.want(d)) / dt.Size()
		kept, err := alloc([4]int{1, 1, 1, max(bytes, 1)})
		if err != nil {
			return op, err
		}
		op.kept = append(op.kept, kept)
		if !last {
			continue
		}
		late, err := alloc([4]int{1, 1, 1, max(bytes, 1)})
		if err != nil {
			return op, err
		}
		op.late = append(op.late, late)
	}
	op.views = make([]a2a.Tensor, n)
	return op, nil
}

// xShape is rank's [B, T_r, H, D]; shardShape its [B, T, H_r, D].
func (op *lateOp) xShape(rank int) [4]int {
	return [4]int{op.cs.Batch, op.cs.Tokens[rank], op.cs.Heads, op.cs.HeadDim}
}

func (op *lateOp) shardShape(rank int) [4]int {
	_, mine := a2a.HeadRange(op.cs.Heads, len(op.cs.Tokens), rank)
	return [4]int{op.cs.Batch, op.cs.Shape().TotalTokens(), mine, op.cs.HeadDim}
}

// inputShape is the shape of each of op's inputs on rank.
func (op *lateOp) inputShape(rank int) [4]int {
	if op.kind.shardIn {
		return op.shardShape(rank)
	}
	return op.xShape(rank)
}

// free releases op's allocations.
func (op *lateOp) free(dev *a2a.Device) {
	for _, t := range op.allocs {
		_ = dev.Free(t)
	}
}

// upload writes fresh random inputs for replay seed and notes what the
// outputs must hold.
func (op *lateOp) upload(dev *a2a.Device, rank int, seed uint64) error {
	op.want = op.want[:0]
	var parts [][]byte
	for k := range op.xs {
		d, err := check.MakeData(op.cs, seed+uint64(k), rank)
		if err != nil {
			return err
		}
		op.want = append(op.want, op.kind.want(d))
		parts = append(parts, op.kind.input(d))
	}
	if op.fused.Ptr != 0 {
		return dev.Upload(op.fused, check.Fuse(parts, op.cs.Heads*op.cs.HeadDim*op.cs.DType.Size()))
	}
	for k, x := range op.xs {
		if err := dev.Upload(x, parts[k]); err != nil {
			return err
		}
	}
	return nil
}

// lateReads captures each of latePrograms on a stream of the rank's own,
// with each view copied out inside the graph right after its operation,
// and replays it lateReplays times with fresh inputs. After each replay
// the rank waits for its stream, sleeps a random 0-3 ms (ranks of a
// service are never in lockstep: the peers are already replaying again),
// then reads the last operation's views from the host and, with a kernel
// on a second stream ordered after the replay by an event, into memory of
// its own. Every output is compared with the reference; the kept copies,
// the late copies and the Comm's writable region are poisoned before
// each replay. Every rank of the group runs it alike.
func (lr *lateRank) lateReads() error {
	c := lr.c
	if err := c.SetRankTokens(lateCases(c.WorldSize(), c.Config().DType)[0].Tokens); err != nil {
		return err
	}
	ts, err := a2a.OpenTestStream(c.Device())
	if err != nil {
		return err
	}
	defer ts.Close()
	other, err := a2a.OpenTestStream(c.Device())
	if err != nil {
		return err
	}
	defer other.Close()
	for pi, program := range latePrograms() {
		if err := lr.replayProgram(ts, other, program, uint64(pi)<<32); err != nil {
			return fmt.Errorf("graph %d (%s): %w", pi, programName(program), err)
		}
	}
	return nil
}

func programName(p []lateKind) string {
	s := ""
	for i, k := range p {
		if i > 0 {
			s += ", "
		}
		s += k.name
	}
	return s
}

// replayProgram captures one program and replays it (lateReads).
func (lr *lateRank) replayProgram(ts, other *a2a.TestStream, program []lateKind, seed uint64) error {
	dev := lr.c.Device()
	var ops []*lateOp
	defer func() {
		for _, op := range ops {
			op.free(dev)
		}
	}()
	for i, k := range program {
		op, err := lr.newLateOp(k, i == len(program)-1)
		if op != nil {
			ops = append(ops, op)
		}
		if err != nil {
			return err
		}
	}
	on := lr.c.On(ts.Stream())
	g, err := a2a.CaptureGraph(ts.Stream(), func() error {
		for _, op := range ops {
			if err := op.kind.run(on, op.cs.Heads, op.views, op.xs); err != nil {
				return err
			}
			for k, v := range op.views {
				if err := ts.CopyDtoD(op.kept[k], v, v.Bytes()); err != nil {
					return err
				}
			}
		}
		return nil
	}, lr.c)
	if err != nil {
		return err
	}
	defer g.Close()
	for i := range lateReplays {
		if err := lr.replayOnce(g, ts, other, ops, i, seed+uint64(i)<<8); err != nil {
			return fmt.Errorf("replay %d: %w", i, err)
		}
	}
	return lr.c.Sync()
}

// replayOnce is one replay of lateReads and its checks.
func (lr *lateRank) replayOnce(g *a2a.Graph, ts, other *a2a.TestStream, ops []*lateOp, i int, seed uint64) error {
	dev, rank := lr.c.Device(), lr.c.Rank()
	poison := [2]byte{0xA5, 0x5A}[i%2] // alternating: a stale poison cannot pass for a fresh one
	for j, op := range ops {
		if err := op.upload(dev, rank, seed+uint64(j)<<4); err != nil {
			return err
		}
		for _, copies := range [][]a2a.Tensor{op.kept, op.late} {
			for _, t := range copies {
				if err := dev.Fill(t, poison); err != nil {
					return err
				}
			}
		}
	}
	if err := dev.Fill(lr.c.Buffer(), poison); err != nil {
		return err
	}
	if err := g.Launch(ts.Stream()); err != nil {
		return err
	}
	if err := other.After(ts); err != nil {
		return err
	}
	if err := ts.Sync(); err != nil {
		return err
	}
	time.Sleep(time.Duration(lr.rng.Int64N(int64(3 * time.Millisecond))))
	last := ops[len(ops)-1]
	for k, v := range last.views {
		got, err := dev.Download(v)
		if err != nil {
			return err
		}
		if err := check.Compare(fmt.Sprintf("%s view %d read by the host after the replay", last.kind.name, k), got, last.want[k]); err != nil {
			return err
		}
		if err := lr.tk.Copy(other, last.late[k], v, v.Bytes()); err != nil {
			return err
		}
	}
	if err := other.Sync(); err != nil {
		return err
	}
	for k, v := range last.views {
		if err := lr.compareCopy(fmt.Sprintf("%s view %d copied by a kernel after the replay", last.kind.name, k), last.late[k], v.Bytes(), last.want[k]); err != nil {
			return err
		}
	}
	for _, op := range ops {
		for k, v := range op.views {
			if err := lr.compareCopy(fmt.Sprintf("%s view %d copied inside the graph", op.kind.name, k), op.kept[k], v.Bytes(), op.want[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// compareCopy compares the first n bytes of t with want.
func (lr *lateRank) compareCopy(what string, t a2a.Tensor, n int64, want []byte) error {
	got, err := lr.c.Device().Download(t)
	if err != nil {
		return err
	}
	return check.Compare(what, got[:n], want)
}

// newLateRank is c's part of the late-read test, with the test kernels
// (loaded before c runs any operation: a module load waits for the
// device).
func newLateRank(c *a2a.Comm) (*lateRank, error) {
	tk, err := a2a.LoadTestKernels(c.Device())
	if err != nil {
		return nil, err
	}
	seed := uint64(time.Now().UnixNano())
	return &lateRank{c: c, tk: tk, rng: rand.New(rand.NewPCG(seed, uint64(c.Rank())))}, nil
}

// workerLateGraph is lateReads in one process per rank.
func workerLateGraph(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	comm, err := joinFor(rk, ex, a2a.BFloat16, lateCases(rk.World, a2a.BFloat16), false)
	if err != nil {
		return err
	}
	lr, err := newLateRank(comm)
	if err == nil {
		err = lr.lateReads()
		err = errors.Join(err, comm.Sync(), lr.tk.Close())
	}
	if cerr := comm.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Printf("rank %d: %d graphs, %d replays each, checked\n", rk.Rank, len(latePrograms()), lateReplays)
	}
	return err
}

// TestGraphViewsOutliveLateReads: graphs of 1, 2 and 3 operations of
// every kind (packed, uneven heads, HeadAllGather), each replayed
// lateReplays times; after each replay every rank reads the last
// operation's views after a random 0-3 ms, while its peers run ahead into
// their next replay. With a process per rank, and in single-process
// groups on every pairPlacements placement: bf16 and fp8, the copy-engine
// mover (captured operations take the kernels) and a single buffer.
func TestGraphViewsOutliveLateReads(t *testing.T) {
	info := requireGPU(t)
	t.Run("processes", func(t *testing.T) {
		runGroup(t, "late-graph", 2, nil)
	})
	modes := []struct {
		name string
		dt   a2a.DType
		opts []func(*a2a.Config)
	}{
		{"bf16", a2a.BFloat16, nil},
		{"fp8", a2a.Float8E4M3, nil},
		{"copy-engines", a2a.BFloat16, []func(*a2a.Config){withMover(a2a.MoverCopyEngines)}},
		{"single-buffer", a2a.BFloat16, []func(*a2a.Config){withSingleBuffer(true)}},
	}
	for _, devices := range pairPlacements(info) {
		for _, m := range modes {
			t.Run(fmt.Sprintf("group%v/%s", devices, m.name), func(t *testing.T) {
				g := newTestGroup(t, devices, m.dt, lateCases(len(devices), m.dt), m.opts...)
				ranks := make([]*lateRank, g.Size())
				for r := range ranks {
					lr, err := newLateRank(g.Comm(r))
					require.NoError(t, err)
					t.Cleanup(func() { require.NoError(t, lr.tk.Close()) })
					ranks[r] = lr
				}
				require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return ranks[c.Rank()].lateReads() }))
				require.NoError(t, g.Sync())
			})
		}
	}
}
