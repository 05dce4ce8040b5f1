package plan

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Env is what planning reads of a Comm besides a request and the token
// counts: fixed when the Comm connects.
type Env struct {
	DType       api.DType // every tensor's, checked when the Comm was made
	Wire        api.Wire
	Rank, World int
	Layout      Layout
	Buf         uintptr // the Comm's buffer
	Widths      []int   // the transport's vector widths in bytes, widest first
}

// Make plans r under the token counts ts, writing data half half: the
// captured cut (a captured operation's inputs cut to the tokens ts gives
// them), then the fp8 wire's entries when env asks for them, else the
// plain entries when they can run r, else the general ones, then the
// placement of r's tensors against the buffer. It is the one entry of
// planning; nothing is enqueued, and on an error nothing changes.
func Make(r Request, env Env, ts Tokens, half uint32) (Plan, error) {
	if Lookup(r.Op) == nil {
		return Plan{}, fmt.Errorf("a2a: unknown operation %q: %w", r.Op, api.ErrNotSupported)
	}
	planned := &r
	if r.Captured {
		if r.Into {
			return Plan{}, fmt.Errorf("a2a: %s: the Into forms cannot be captured (their copy would keep the capture's size): read the view: %w", r.Op, api.ErrNotSupported)
		}
		cut, err := r.cut(ts, env.Rank, int64(env.DType.Size()))
		if err != nil {
			return Plan{}, err
		}
		planned = &cut
	}
	p, err := env.choose(planned, ts)
	if err != nil {
		return Plan{}, err
	}
	if err := env.checkPlacement(&r, &p, half); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// choose plans r with the entries that run it: the fp8 wire's when env
// asks for them, the general ones for what the plain ones cannot run
// (several tensors, heads the world size does not divide, a token stride,
// HeadAllGather), else the plain ones.
func (env *Env) choose(r *Request, ts Tokens) (Plan, error) {
	if env.Wire.Lossy() {
		return wire(r, env, ts)
	}
	shared := r.sharedGeneral(env.World)
	if shared || r.Xs[0].Strided() {
		return general(r, env, ts, shared)
	}
	return plain(r, env, ts)
}

// Fits reports whether r's inputs hold the tokens the counts ts give them
// on rank (need): rank's own where its operation's input holds them
// (Operation.In), all ranks' otherwise (GatherHeads, HeadAllGather). A
// captured input's token dimension is the most tokens any replay may
// use, of which the counts use the first ones.
func (r Request) Fits(ts Tokens, rank int) (need int, ok bool) {
	need = ts.Total()
	if Lookup(r.Op).In&RankTokens != 0 {
		need = ts.Counts[rank]
	}
	return need, r.Xs[0].Shape[1] >= need
}

// cut is r with its inputs (of es-byte elements) cut to the tokens the
// counts ts give them on rank (Fits).
func (r Request) cut(ts Tokens, rank int, es int64) (Request, error) {
	need, ok := r.Fits(ts, rank)
	if !ok {
		return Request{}, fmt.Errorf("a2a: captured %s input %v holds %d tokens, the counts need %d: %w", r.Op, r.Xs[0], r.Xs[0].Shape[1], need, api.ErrTokens)
	}
	for k := range r.N {
		x := &r.Xs[k]
		x.Shape[1] = need
		x.Span = span(int64(x.Shape[0])*int64(need), x.RowElems, int64(x.Shape[2])*int64(x.Shape[3]), es)
	}
	return r, nil
}
