package cuinterop_test

import (
	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/cuinterop"
)

// comm is a rank's Comm, from a2a.Join or a2a.NewGroup, on device 0.
var comm *a2a.Comm

// Memory and a stream made with gorgonia.org/cu in device 0's primary
// context go straight into an operation, ordered after the work on the
// stream.
func Example() {
	b, t, h, d := 1, 1024, 16, 128
	pctx, err := cu.Device(0).RetainPrimaryCtx()
	if err != nil {
		panic(err)
	}
	defer cu.Device(0).ReleasePrimaryCtx()
	if err := pctx.Lock(); err != nil { // locks the OS thread, pctx current on it
		panic(err)
	}
	mem, err := cu.MemAlloc(int64(b * t * h * d * a2a.BFloat16.Size()))
	if err != nil {
		panic(err)
	}
	defer cu.MemFree(mem)
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		panic(err)
	}
	defer s.Destroy()

	x, err := cuinterop.Tensor(mem, [4]int{b, t, h, d}, a2a.BFloat16)
	if err != nil {
		panic(err) // memory of cu.NewContext's context: errors.Is(err, cuinterop.ErrNotPrimaryContext)
	}
	stream, err := cuinterop.Stream(s)
	if err != nil {
		panic(err)
	}
	q, err := comm.On(stream).SendRecvHeads(x) // q: [B, T, H/P, D], a view in the Comm's buffer
	if err != nil {
		panic(err)
	}
	_ = cuinterop.DevicePtr(q)          // for gorgonia's copies and kernels on s
	if err := comm.Sync(); err != nil { // before the deferred frees
		panic(err)
	}
}
