//go:build linux

package main

import (
	_ "embed"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/ulysses-go/ulysses/a2a"
)

//go:generate sh gen.sh

//go:embed attention.ptx
var attentionPTX string

// The few CUDA driver calls the example makes itself, through purego as
// the library does: a model's own kernels come from its own binding
// (purego, gorgonia.org/cu or cgo); the library only needs their stream.
var cu struct {
	once sync.Once
	err  error

	deviceGet         func(dev *int32, ordinal int32) int32
	primaryCtxRetain  func(ctx *uintptr, dev int32) int32
	primaryCtxRelease func(dev int32) int32
	ctxSetCurrent     func(ctx uintptr) int32
	moduleLoadData    func(mod *uintptr, image *byte) int32
	moduleGetFunction func(f *uintptr, mod uintptr, name *byte) int32
	moduleUnload      func(mod uintptr) int32
	launchKernel      func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params, extra unsafe.Pointer) int32
	eventCreate       func(e *uintptr, flags uint32) int32
	eventRecord       func(e, s uintptr) int32
	eventSynchronize  func(e uintptr) int32
	eventElapsedTime  func(ms *float32, start, end uintptr) int32
	eventDestroy      func(e uintptr) int32
}

// loadCUDA binds the calls above from libcuda.so.1, which the library has
// already loaded and initialised by the time the example gets here.
func loadCUDA() error {
	cu.once.Do(func() {
		lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			cu.err = err
			return
		}
		for name, fn := range map[string]any{
			"cuDeviceGet": &cu.deviceGet, "cuDevicePrimaryCtxRetain": &cu.primaryCtxRetain,
			"cuDevicePrimaryCtxRelease_v2": &cu.primaryCtxRelease, "cuCtxSetCurrent": &cu.ctxSetCurrent,
			"cuModuleLoadData": &cu.moduleLoadData, "cuModuleGetFunction": &cu.moduleGetFunction,
			"cuModuleUnload": &cu.moduleUnload, "cuLaunchKernel": &cu.launchKernel,
			"cuEventCreate": &cu.eventCreate, "cuEventRecord": &cu.eventRecord,
			"cuEventSynchronize": &cu.eventSynchronize, "cuEventElapsedTime": &cu.eventElapsedTime,
			"cuEventDestroy_v2": &cu.eventDestroy,
		} {
			purego.RegisterLibFunc(fn, lib, name)
		}
	})
	return cu.err
}

func check(call string, r int32) error {
	if r != 0 {
		return fmt.Errorf("%s: CUresult %d", call, r)
	}
	return nil
}

// gpu is the example's kernel on one device, in the device's primary
// context (the one the library uses, so pointers and streams are shared).
type gpu struct {
	dev     int32
	ctx     uintptr
	mod, fn uintptr
}

// openGPU loads the attention kernel on device ordinal.
func openGPU(ordinal int) (*gpu, error) {
	if err := loadCUDA(); err != nil {
		return nil, err
	}
	g := &gpu{}
	if err := check("cuDeviceGet", cu.deviceGet(&g.dev, int32(ordinal))); err != nil {
		return nil, err
	}
	if err := check("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(&g.ctx, g.dev)); err != nil {
		return nil, err
	}
	err := g.in(func() error {
		image := append([]byte(attentionPTX), 0)
		if err := check("cuModuleLoadData", cu.moduleLoadData(&g.mod, &image[0])); err != nil {
			return err
		}
		name := append([]byte("attention"), 0)
		return check("cuModuleGetFunction", cu.moduleGetFunction(&g.fn, g.mod, &name[0]))
	})
	if err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// in runs f with the device's context current on a locked OS thread.
func (g *gpu) in(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", cu.ctxSetCurrent(g.ctx)); err != nil {
		return err
	}
	return f()
}

func (g *gpu) close() {
	if g.mod != 0 {
		_ = g.in(func() error { return check("cuModuleUnload", cu.moduleUnload(g.mod)) })
	}
	_ = cu.primaryCtxRelease(g.dev)
}

// attention enqueues o = attention(q, k, v) on s: q, k and v are
// [B, T, heads, 64] bf16 of one token stride, o [B, T, heads, 64].
func (g *gpu) attention(s a2a.Stream, q, k, v, o a2a.Tensor) error {
	tokens, heads := int32(q.Shape[1]), int32(q.Shape[2])
	inStride, outStride := rowElems(q), rowElems(o)
	scale := float32(1 / math.Sqrt(headDim))
	params := []unsafe.Pointer{
		unsafe.Pointer(&q.Ptr), unsafe.Pointer(&k.Ptr), unsafe.Pointer(&v.Ptr), unsafe.Pointer(&o.Ptr),
		unsafe.Pointer(&tokens), unsafe.Pointer(&heads), unsafe.Pointer(&inStride),
		unsafe.Pointer(&outStride), unsafe.Pointer(&scale),
	}
	const block = 128
	grid := (uint32(tokens)*uint32(heads) + block - 1) / block
	return g.in(func() error {
		r := cu.launchKernel(g.fn, grid, uint32(q.Shape[0]), 1, block, 1, 1, 0, uintptr(s),
			unsafe.Pointer(&params[0]), nil)
		runtime.KeepAlive(params)
		return check("cuLaunchKernel", r)
	})
}

// rowElems is the number of elements between consecutive tokens of t.
func rowElems(t a2a.Tensor) int32 {
	if t.RowStride != 0 {
		return int32(t.RowStride)
	}
	return int32(t.Shape[2] * t.Shape[3])
}

// events are device timestamps on one stream.
type events []uintptr

func (g *gpu) newEvents(n int) (events, error) {
	ev := make(events, n)
	err := g.in(func() error {
		for i := range ev {
			if err := check("cuEventCreate", cu.eventCreate(&ev[i], 0)); err != nil {
				return err
			}
		}
		return nil
	})
	return ev, err
}

func (g *gpu) record(e uintptr, s a2a.Stream) error {
	return g.in(func() error { return check("cuEventRecord", cu.eventRecord(e, uintptr(s))) })
}

// elapsed waits for the last event and returns the times between
// consecutive events.
func (g *gpu) elapsed(ev events) ([]float64, error) {
	ms := make([]float64, len(ev)-1)
	err := g.in(func() error {
		if err := check("cuEventSynchronize", cu.eventSynchronize(ev[len(ev)-1])); err != nil {
			return err
		}
		for i := range ms {
			var t float32
			if err := check("cuEventElapsedTime", cu.eventElapsedTime(&t, ev[i], ev[i+1])); err != nil {
				return err
			}
			ms[i] = float64(t)
		}
		return nil
	})
	return ms, err
}

func (g *gpu) destroy(ev events) {
	_ = g.in(func() error {
		for _, e := range ev {
			if e != 0 {
				_ = cu.eventDestroy(e)
			}
		}
		return nil
	})
}
