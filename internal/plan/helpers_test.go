package plan

import (
	"testing"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// tensor is a test's [B, T, H, D] tensor of es-byte elements at ptr,
// tokens stride elements apart (0: contiguous), before NewInput checks
// it as package a2a does.
type tensor struct {
	Ptr    uintptr
	Shape  [4]int
	es     int
	Stride int
}

func bf16(ptr uintptr, b, t, h, d int) tensor {
	return tensor{Ptr: ptr, Shape: [4]int{b, t, h, d}, es: 2}
}

func fp8(ptr uintptr, b, t, h, d int) tensor {
	return tensor{Ptr: ptr, Shape: [4]int{b, t, h, d}, es: 1}
}

// dtype is a type of x's element size.
func (x tensor) dtype() api.DType {
	if x.es == 1 {
		return api.Float8E4M3
	}
	return api.BFloat16
}

// input is NewInput of x.
func (x tensor) input() (Input, error) { return NewInput(x.Ptr, x.Shape, x.Stride, x.es) }

// must is x's Input, for a test of a valid tensor.
func (x tensor) must(tb testing.TB) Input {
	tb.Helper()
	in, err := x.input()
	if err != nil {
		tb.Fatalf("%v: %v", x, err)
	}
	return in
}

// single is the request of op on x alone.
func single(op ptx.Op, x Input) Request {
	return Request{Op: op, N: 1, Xs: [MaxTensors]Input{x}}
}

// request is the request of op on xs, heads in all, each checked.
func request(tb testing.TB, op ptx.Op, heads int, xs ...tensor) Request {
	tb.Helper()
	r := Request{Op: op, N: len(xs), Heads: heads}
	for k, x := range xs {
		r.Xs[k] = x.must(tb)
	}
	return r
}

// envOf is rank's Env in a world of world ranks with capacity bytes per
// data half, dt elements, the transport's widths and a buffer far from
// every tensor of the tests.
func envOf(dt api.DType, rank, world int, capacity int64, widths []int) Env {
	return Env{DType: dt, Rank: rank, World: world, Layout: Layout{DataBytes: capacity}, Buf: 1 << 50, Widths: widths}
}

// plainOf is plain of op on x alone, checked first as the face checks it.
func plainOf(op ptx.Op, x tensor, rank, world int, ts Tokens, capacity int64, widths []int) (Plan, error) {
	in, err := x.input()
	if err != nil {
		return Plan{}, err
	}
	r, env := single(op, in), envOf(x.dtype(), rank, world, capacity, widths)
	return plain(&r, &env, ts)
}

// generalOf is general of r (bf16 elements, widths2) on rank of world, as
// choose calls it.
func generalOf(r Request, rank, world int, ts Tokens, capacity int64) (Plan, error) {
	env := envOf(api.BFloat16, rank, world, capacity, widths2)
	return general(&r, &env, ts, r.sharedGeneral(world))
}
