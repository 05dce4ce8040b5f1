// Package check runs the collectives on a connected Comm and compares every
// output with the CPU reference, byte for byte, on random data with the
// outputs poisoned before each run. The GPU tests and `ulysses check` share it.
package check

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
)

// Case is one shape to check. Heads is the full head count H.
type Case struct {
	Name    string
	Batch   int
	Tokens  []int // per rank
	Heads   int
	HeadDim int
	DType   a2a.DType
	// Misalign shifts every input pointer by this many elements, which
	// forces the kernels' narrower copy paths.
	Misalign int
	// Tensors, when 2 or more, adds the packed operations of that many
	// tensors (SendRecvHeadsPacked, GatherHeadsPacked) to Run.
	Tensors int
	// Strided makes the packed operations' inputs views into one fused
	// tensor ([B, T, Tensors, H, D]), as q, k and v out of one projection.
	Strided bool
	// Narrow draws 16-bit inputs as activations look: magnitudes in
	// [2^-8, 2^8), except one element in 64 left as a random pattern
	// (subnormals, Inf and NaN among them). Without it every pattern is
	// equally likely, so a row's largest element dwarfs the others, which
	// a lossy wire then rounds to zero.
	Narrow bool
}

func (c Case) String() string {
	s := fmt.Sprintf("%s B=%d T=%v H=%d D=%d %v", c.Name, c.Batch, c.Tokens, c.Heads, c.HeadDim, c.DType)
	if c.Misalign != 0 {
		s += fmt.Sprintf(" misaligned+%d", c.Misalign)
	}
	if c.Tensors > 1 {
		s += fmt.Sprintf(" packed x%d", c.Tensors)
	}
	if c.Strided {
		s += " strided"
	}
	if c.Narrow {
		s += " narrow"
	}
	return s
}

// even reports whether the world size divides the heads.
func (c Case) even() bool { return c.Heads%len(c.Tokens) == 0 }

// tensors is how many outputs the case's largest operation leaves in the
// Comm's buffer at once.
func (c Case) tensors() int { return max(c.Tensors, 1) }

// Shape is the case as the reference sees it.
func (c Case) Shape() ref.Shape {
	return ref.Shape{Batch: c.Batch, Heads: c.Heads, HeadDim: c.HeadDim, ElemSize: c.DType.Size(), Tokens: c.Tokens}
}

// Capacity is the smallest Comm capacity that holds the largest output of
// every case: as HiddenDim the largest Heads*HeadDim, and as MaxTokens the
// tokens of that size it takes to hold the most elements a case gathers
// (B*T*H*D), times its packed tensors, each rounded up to 256 bytes; at
// least 1 of each.
func Capacity(cases ...Case) (maxTokens, hiddenDim int) {
	hiddenDim, elems := 1, 1
	for _, c := range cases {
		hiddenDim = max(hiddenDim, c.Heads*c.HeadDim)
		one := c.Batch * c.Shape().TotalTokens() * c.Heads * c.HeadDim
		if n := c.tensors(); n > 1 {
			es := c.DType.Size()
			one = (one*es + 255) / 256 * 256 * n / es
		}
		elems = max(elems, one)
	}
	return (elems + hiddenDim - 1) / hiddenDim, hiddenDim
}

// inputs makes every rank's input of the case from seed, so every process
// can compute any rank's expected output.
func inputs(cs Case, seed uint64) [][]byte {
	s := cs.Shape()
	in := make([][]byte, s.World())
	for r := range in {
		in[r] = make([]byte, s.RankInputBytes(r))
		ref.FillRandom(in[r], seed, r)
		if cs.Narrow {
			narrow(in[r], cs.DType)
		}
	}
	return in
}

// narrow rewrites the exponent of all but every 64th 16-bit element of b
// so that its magnitude lies in [2^-8, 2^8); other types are left as they are.
func narrow(b []byte, dt a2a.DType) {
	for i := 0; i+1 < len(b); i += 2 {
		if i%128 == 0 {
			continue
		}
		u := binary.LittleEndian.Uint16(b[i:])
		switch dt {
		case a2a.BFloat16: // 1.8.7: biased exponents 119..134
			u = u&0x807F | (119+u>>7&15)<<7
		case a2a.Float16: // 1.5.10: biased exponents 7..22
			u = u&0x83FF | (7+u>>10&15)<<10
		default:
			return
		}
		binary.LittleEndian.PutUint16(b[i:], u)
	}
}

// poisons are the byte values outputs are filled with before a run; they
// alternate so a stale poison cannot pass for a fresh one.
var poisons = [...]byte{0xA5, 0x5A, 0xC3}

// Mismatch reports an output that differs from the reference.
type Mismatch struct {
	What        string
	First, Diff int // first differing byte, number of differing bytes
	Len         int
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("check: %s differs from the reference in %d of %d bytes, first at %d", m.What, m.Diff, m.Len, m.First)
}

// ErrMismatch matches every *Mismatch.
var ErrMismatch = errors.New("check: output differs from the reference")

// Is matches ErrMismatch.
func (m *Mismatch) Is(target error) bool { return target == ErrMismatch }

func compare(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	m := &Mismatch{What: what, First: -1, Len: len(want)}
	if len(got) != len(want) {
		return fmt.Errorf("check: %s has %d bytes, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			if m.First < 0 {
				m.First = i
			}
			m.Diff++
		}
	}
	return m
}

// runner holds the device tensors of one case on one rank.
type runner struct {
	comm   *a2a.Comm
	dev    *a2a.Device
	cs     Case
	shape  ref.Shape
	allocs []a2a.Tensor
	poison int
}

func (r *runner) free() {
	for _, t := range r.allocs {
		r.dev.Free(t)
	}
}

// newRunner validates cs against comm and sets its token counts; every
// rank of the group must call it with the same case.
func newRunner(comm *a2a.Comm, cs Case) (*runner, error) {
	s := cs.Shape()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.World() != comm.WorldSize() {
		return nil, fmt.Errorf("check: case has %d ranks, the Comm %d", s.World(), comm.WorldSize())
	}
	if err := comm.SetRankTokens(cs.Tokens); err != nil {
		return nil, err
	}
	return &runner{comm: comm, dev: comm.Device(), cs: cs, shape: s}, nil
}

// inputSet is one seed's data for this rank: its input x, its share y of
// SendRecvHeads' output (GatherHeads' input), and the reference outputs.
type inputSet struct {
	x, y         a2a.Tensor
	own, srh, ag []byte // x's bytes (GatherHeads' output), SendRecvHeads', AllGather's
}

// Data is one rank's share of a case made from a seed: its input X
// ([B, T_r, H, D]), which is also GatherHeads' expected output, its shard
// of SendRecvHeads' output (GatherHeads' input, [B, T, H/P, D]), and
// AllGather's expected output ([B, T, H, D]).
type Data struct {
	X, Shard, Gathered []byte
}

// MakeData computes rank's Data for cs from seed with the CPU reference.
// Every rank computes every rank's input, so it costs the whole case's
// bytes in host memory and time.
func MakeData(cs Case, seed uint64, rank int) (Data, error) {
	s := cs.Shape()
	if err := s.Validate(); err != nil {
		return Data{}, err
	}
	in := inputs(cs, seed)
	d := Data{X: in[rank], Shard: make([]byte, s.HeadShardBytesFor(rank)), Gathered: make([]byte, s.GatheredBytes())}
	if err := ref.SendRecvHeadsFor(s, rank, in, d.Shard); err != nil {
		return d, err
	}
	return d, ref.AllGatherFor(s, rank, in, d.Gathered)
}

// Compare returns a *Mismatch when got differs from want; what names the
// output in the error.
func Compare(what string, got, want []byte) error { return compare(what, got, want) }

// inputs computes this rank's inputs and expected outputs for seed and
// uploads x and y.
func (r *runner) inputs(seed uint64) (inputSet, error) {
	d, err := MakeData(r.cs, seed, r.comm.Rank())
	set := inputSet{own: d.X, srh: d.Shard, ag: d.Gathered}
	if err != nil {
		return set, err
	}
	if set.x, err = r.upload(r.localShape(), set.own); err != nil {
		return set, err
	}
	if set.y, err = r.upload(r.shardShape(), set.srh); err != nil {
		return set, err
	}
	return set, r.overTheWire(set.own, set.srh, set.ag)
}

// overTheWire turns exact expected outputs, in place, into what the
// Comm's wire delivers (ref.RoundTripRows: every operation moves whole
// rows); with the exact wire it does nothing. Call it after uploading
// whatever of them is also an input.
func (r *runner) overTheWire(wants ...[]byte) error {
	for _, b := range wants {
		if err := ref.RoundTripRows(r.comm.Config().Wire, r.cs.DType, b, r.cs.HeadDim); err != nil {
			return err
		}
	}
	return nil
}

// localShape is [B, T_r, H, D] on this rank; shardShape [B, T, H/P, D];
// fullShape [B, T, H, D].
func (r *runner) localShape() [4]int {
	return [4]int{r.cs.Batch, r.cs.Tokens[r.comm.Rank()], r.cs.Heads, r.cs.HeadDim}
}

func (r *runner) shardShape() [4]int {
	_, heads := a2a.HeadRange(r.cs.Heads, r.shape.World(), r.comm.Rank())
	return [4]int{r.cs.Batch, r.shape.TotalTokens(), heads, r.cs.HeadDim}
}

func (r *runner) fullShape() [4]int {
	return [4]int{r.cs.Batch, r.shape.TotalTokens(), r.cs.Heads, r.cs.HeadDim}
}

// upload allocates a tensor of shape holding b, shifted by the case's misalignment.
func (r *runner) upload(shape [4]int, b []byte) (a2a.Tensor, error) {
	es := r.cs.DType.Size()
	pad := r.cs.Misalign
	raw, err := r.dev.Alloc([4]int{1, 1, 1, int(int64(len(b))/int64(es)) + pad}, r.cs.DType)
	if err != nil {
		return a2a.Tensor{}, err
	}
	r.allocs = append(r.allocs, raw)
	t := a2a.Tensor{Ptr: raw.Ptr + uintptr(pad*es), Shape: shape, DType: r.cs.DType}
	return t, r.dev.Upload(t, b)
}

// output allocates a poisoned tensor for an Into form.
func (r *runner) output(shape [4]int) (a2a.Tensor, error) {
	t, err := r.dev.Alloc(shape, r.cs.DType)
	if err != nil {
		return t, err
	}
	r.allocs = append(r.allocs, t)
	return t, r.dev.Fill(t, r.nextPoison())
}

func (r *runner) nextPoison() byte {
	r.poison++
	return poisons[r.poison%len(poisons)]
}

// readView waits for the operation that returned out, reads the view, and
// then poisons the region it lies in. That region is this rank's until its
// next operation, and it is the one the operation after next writes, so
// every output is written over poison. (Poisoning before an operation is not
// allowed: with the double buffer, peers may already be writing it.)
func (r *runner) readView(out a2a.Tensor) ([]byte, error) {
	b, err := r.readViews([]a2a.Tensor{out})
	if err != nil {
		return nil, err
	}
	return b[0], nil
}

// view runs op and returns the bytes of the view it gave back.
func (r *runner) view(op func(a2a.Tensor) (a2a.Tensor, error), x a2a.Tensor) ([]byte, error) {
	out, err := op(x)
	if err != nil {
		return nil, err
	}
	return r.readView(out)
}

// into runs an Into form into a poisoned tensor of shape and returns its bytes.
func (r *runner) into(op func(dst, x a2a.Tensor) error, x a2a.Tensor, shape [4]int) ([]byte, error) {
	dst, err := r.output(shape)
	if err != nil {
		return nil, err
	}
	if err := op(dst, x); err != nil {
		return nil, err
	}
	// Reads dst, then poisons the Comm's region the operation went through.
	return r.readView(dst)
}

// readViews is readView of several outputs of one operation: it waits,
// reads them all, then poisons the Comm's buffer.
func (r *runner) readViews(ts []a2a.Tensor) ([][]byte, error) {
	if err := r.comm.Sync(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(ts))
	for k, t := range ts {
		b, err := r.dev.Download(t)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, r.dev.Fill(r.comm.Buffer(), r.nextPoison())
}
