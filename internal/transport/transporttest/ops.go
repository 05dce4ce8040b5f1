package transporttest

import (
	"testing"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/ptx"
)

// Case is the data of the operations of one group, written out by hand
// rather than planned: the gathered [B, T, H, D] tensor of 2-byte
// elements, each element's value its index, of which every rank's input
// and output of every operation is a slice (the table of docs/DESIGN.md,
// "The four operations").
type Case struct {
	B, H, D int
	Tokens  plan.Tokens
	all     []byte
}

// NewCase is the Case of ranks of counts tokens, [B, T, H, D] in all
// (fewer than 65536 elements, so that each is told apart).
func NewCase(counts []int, B, H, D int) Case {
	c := Case{B: B, H: H, D: D, Tokens: plan.NewTokens(counts)}
	n := B * c.Tokens.Total() * H * D
	c.all = make([]byte, 2*n)
	for i := range n {
		c.all[2*i], c.all[2*i+1] = byte(i), byte(i>>8)
	}
	return c
}

// slice is tokens [t0, t1) and heads [h0, h1) of the gathered tensor, as
// a dense tensor.
func (c Case) slice(t0, t1, h0, h1 int) []byte {
	out := []byte{}
	T := c.Tokens.Total()
	for b := range c.B {
		for t := t0; t < t1; t++ {
			at := ((b*T+t)*c.H + h0) * c.D * 2
			out = append(out, c.all[at:at+(h1-h0)*c.D*2]...)
		}
	}
	return out
}

// Want is rank's input of op, its shape, and its output: a side holds the
// rank's own tokens or all, the rank's heads (plan.HeadRange) or all. It
// panics for an operation it has no case of.
func (c Case) Want(op ptx.Op, rank int) (in []byte, shape [4]int, out []byte) {
	ts, T := c.Tokens, c.Tokens.Total()
	t0, t1 := ts.Prefix[rank], ts.Prefix[rank+1]
	h0, n := plan.HeadRange(c.H, len(ts.Counts), rank)
	own, share, whole := c.slice(t0, t1, 0, c.H), c.slice(0, T, h0, h0+n), c.slice(0, T, 0, c.H)
	ownShape, shareShape := [4]int{c.B, t1 - t0, c.H, c.D}, [4]int{c.B, T, n, c.D}
	switch op {
	case ptx.OpSendRecvHeads:
		return own, ownShape, share
	case ptx.OpGatherHeads:
		return share, shareShape, own
	case ptx.OpAllGather:
		return own, ownShape, whole
	case ptx.OpHeadAllGather:
		return share, shareShape, whole
	}
	panic("transporttest: no data for " + string(op))
}

// Plan is op of rank r's input (Want, copied to the device) planned for
// data half half as a Comm plans it: plan.Make, then tr's PlanMover, with
// tr given the case's counts first. It fails tb on any error, and returns
// the output r wants.
func (c Case) Plan(tb testing.TB, d *Device, r *Rank, tr transport.Transport, op ptx.Op, half uint32) (plan.Plan, []byte) {
	tb.Helper()
	in, shape, out := c.Want(op, r.Rank)
	tr.SetTokens(c.Tokens)
	x, err := plan.NewInput(uintptr(d.Alloc(tb, max(len(in), 2), in)), shape, 0, 2)
	if err != nil {
		tb.Fatalf("%s input of rank %d: %v", op, r.Rank, err)
	}
	req := plan.Request{Op: op, N: 1, Heads: c.H, Xs: [plan.MaxTensors]plan.Input{x}}
	env := plan.Env{DType: r.DType, Rank: r.Rank, World: r.World, Layout: r.Layout, Buf: uintptr(r.Buf), Widths: tr.Widths()}
	p, err := plan.Make(req, env, c.Tokens, half)
	if err == nil {
		p, err = tr.PlanMover(p, req, c.Tokens)
	}
	if err != nil {
		tb.Fatalf("planning %s on rank %d: %v", op, r.Rank, err)
	}
	return p, out
}

// Output is the first n bytes of data half half of r's buffer.
func (d *Device) Output(tb testing.TB, r *Rank, half uint32, n int) []byte {
	tb.Helper()
	return d.Bytes(tb, r.Buf+driver.DevicePtr(r.Layout.HalfOff(half)), int64(n))
}
