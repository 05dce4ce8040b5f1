package cuinterop_test

import (
	"runtime"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// device is what one rank of a test holds of gorgonia.org/cu: its device's
// primary context, retained, and a stream made in it. The test goroutine
// is locked to its OS thread (runtime.LockOSThread); use makes the
// context current on it before gorgonia's calls, since a goroutine may
// drive several devices.
type device struct {
	dev    cu.Device
	pctx   cu.CUContext
	stream cu.Stream
}

// openDevice retains ordinal's primary context and makes a non-blocking
// stream in it; tb's cleanup destroys the stream and releases the context.
func openDevice(tb testing.TB, ordinal int) *device {
	tb.Helper()
	d := &device{dev: cu.Device(ordinal)}
	var err error
	if d.pctx, err = d.dev.RetainPrimaryCtx(); err != nil {
		tb.Fatalf("retaining device %d's primary context: %v", ordinal, err)
	}
	tb.Cleanup(func() { d.dev.ReleasePrimaryCtx() })
	d.use(tb)
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		tb.Fatalf("cu.MakeStream on device %d: %v", ordinal, err)
	}
	tb.Cleanup(func() { d.use(tb); d.stream.Destroy() })
	return d
}

// use makes d's primary context current on the calling thread.
func (d *device) use(tb testing.TB) {
	tb.Helper()
	if err := cu.SetCurrentContext(d.pctx); err != nil {
		tb.Fatalf("cu.SetCurrentContext(device %d's primary): %v", d.dev, err)
	}
}

// alloc allocates n bytes (at least one) on d and fills them with fill;
// tb's cleanup frees them.
func (d *device) alloc(tb testing.TB, n int, fill byte) cu.DevicePtr {
	tb.Helper()
	d.use(tb)
	mem, err := cu.MemAlloc(int64(max(n, 1)))
	if err != nil {
		tb.Fatalf("cu.MemAlloc(%d) on device %d: %v", n, d.dev, err)
	}
	tb.Cleanup(func() { d.use(tb); cu.MemFree(mem) })
	if err := cu.MemsetD8(mem, fill, int64(max(n, 1))); err != nil {
		tb.Fatalf("cu.MemsetD8: %v", err)
	}
	return mem
}

// upload allocates len(b) bytes on d and copies b there (cu.MemcpyHtoD).
func (d *device) upload(tb testing.TB, b []byte) cu.DevicePtr {
	tb.Helper()
	mem := d.alloc(tb, len(b), 0)
	if len(b) > 0 {
		if err := cu.MemcpyHtoD(mem, unsafe.Pointer(&b[0]), int64(len(b))); err != nil {
			tb.Fatalf("cu.MemcpyHtoD: %v", err)
		}
	}
	return mem
}

// download copies n bytes at mem back (cu.MemcpyDtoH), after the work
// queued on d's stream.
func (d *device) download(tb testing.TB, mem cu.DevicePtr, n int) []byte {
	tb.Helper()
	d.use(tb)
	if err := d.stream.Synchronize(); err != nil {
		tb.Fatalf("synchronising device %d's stream: %v", d.dev, err)
	}
	b := make([]byte, n)
	if n > 0 {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&b[0]), mem, int64(n)); err != nil {
			tb.Fatalf("cu.MemcpyDtoH: %v", err)
		}
	}
	return b
}

// lockThread locks the test's goroutine to its OS thread for good, so that
// the context its gorgonia calls use stays current, its cleanups
// included (they run on the same goroutine); the thread ends with it.
func lockThread() { runtime.LockOSThread() }
