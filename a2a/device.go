package a2a

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// Device is one CUDA device's primary context (the one the CUDA runtime and
// most bindings use), with memory helpers for users who have no other CUDA
// binding. The helpers run on a stream of the Device's own and return when
// their work is done on the device. Besides it they wait only for the
// queued operations of a Comm whose buffer they touch (a view), never for
// other work on the device (docs/RELIABILITY.md, "Concurrency"). They cost
// a stream synchronisation each: for setup and tests, not the hot path.
//
// Once closed (by Close, or with its Comm for Comm.Device), and on a
// Device that OpenDevice did not make (nil, or the zero Device), the
// helpers return an error matching ErrClosed and Close returns nil; Info
// still describes the device (the zero DeviceInfo for one never made).
type Device struct {
	drv    *driver.Driver
	ctx    *driver.Context
	info   DeviceInfo
	copies driver.Stream // the helpers' stream
	closed atomic.Bool   // Close has begun: the helpers refuse
}

// closedDeviceError is what a Device's helpers return once it is closed,
// or when OpenDevice did not make it. It matches ErrClosed.
type closedDeviceError struct {
	what  string // the helper
	never bool   // OpenDevice did not make the Device
}

// Error names the helper and why the Device cannot run it.
func (e *closedDeviceError) Error() string {
	if e.never {
		return "a2a: " + e.what + " on a Device that OpenDevice did not make (nil, or the zero Device)"
	}
	return "a2a: " + e.what + " on a closed Device (closed by Close, or with its Comm): its context is released"
}

// Is matches ErrClosed.
func (e *closedDeviceError) Is(target error) bool { return target == ErrClosed }

// usable returns nil when the helper what may run on d.
func (d *Device) usable(what string) error {
	if d == nil || d.ctx == nil {
		return &closedDeviceError{what: what, never: true}
	}
	if d.closed.Load() {
		return &closedDeviceError{what: what}
	}
	return nil
}

// OpenDevice retains the primary context of device ordinal. Close releases it.
// While a Device is open the context outlives the Comms on it: the driver
// creates the context with the first Comm and destroys it with the last
// one's Close (on an H200 a NewGroup took 0.55 s and a Close 0.37 s for
// it), so a process that makes groups again and again keeps them cheap
// (12 ms a NewGroup there) by holding a Device for its life, at the cost
// of the context's memory.
func OpenDevice(ordinal int) (*Device, error) {
	return openDevice(&ordinal, 0)
}

// loadDriver opens the CUDA driver: driver.Load, the process's one driver.
// It is a variable for the tests, which give the package a stub driver of
// their own through it (export_test.go).
var loadDriver = driver.Load

func openDevice(ordinal *int, rank int) (*Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, api.WrapDriver("loading the CUDA driver", err)
	}
	n, err := drv.RequireDevices()
	if err != nil {
		return nil, api.WrapDriver("counting devices", err)
	}
	ord := rank % n
	if ordinal != nil {
		ord = *ordinal
	}
	if ord < 0 || ord >= n {
		return nil, fmt.Errorf("a2a: device %d of %d visible: %w", ord, n, ErrConfig)
	}
	info, err := deviceInfo(drv, ord)
	if err != nil {
		return nil, err
	}
	if !info.Unified {
		return nil, fmt.Errorf("a2a: device %d (%s) lacks unified addressing: %w", ord, info.Name, ErrNotSupported)
	}
	ctx, err := drv.RetainPrimaryContext(ord)
	if err != nil {
		return nil, api.WrapDriver("retaining the primary context", err)
	}
	copies, err := ctx.StreamCreate(true)
	if err != nil {
		ctx.Release()
		return nil, api.WrapDriver("creating the helpers' stream", err)
	}
	return &Device{drv: drv, ctx: ctx, info: info, copies: copies}, nil
}

// Info describes the device (the zero DeviceInfo for a Device that
// OpenDevice did not make).
func (d *Device) Info() DeviceInfo {
	if d == nil {
		return DeviceInfo{}
	}
	return d.info
}

// Close destroys the helpers' stream and releases the context;
// idempotent. Afterwards the helpers return an error matching ErrClosed:
// free what was allocated through the Device first (memory that Free has
// not released goes with the context, once nothing else retains it).
func (d *Device) Close() error {
	if d == nil || d.ctx == nil || d.closed.Swap(true) {
		return nil
	}
	var errs []error
	if d.copies != 0 {
		if err := d.ctx.StreamDestroy(d.copies); err != nil {
			errs = append(errs, api.WrapDriver("destroying the helpers' stream", err))
		}
		d.copies = 0
	}
	if err := d.ctx.Release(); err != nil {
		errs = append(errs, api.WrapDriver("releasing the context", err))
	}
	return errors.Join(errs...)
}

// finish waits for the helpers' stream: what was enqueued on it is done on
// the device, and visible to any work enqueued after this returns.
func (d *Device) finish(what string, err error) error {
	return device.SyncAfter(d.ctx, d.copies, what, err)
}

// Alloc allocates an uninitialised tensor on the device (cuMemAlloc,
// which waits for nothing).
func (d *Device) Alloc(shape [4]int, dt DType) (Tensor, error) {
	if err := d.usable("Alloc"); err != nil {
		return Tensor{}, err
	}
	t := Tensor{Shape: shape, DType: dt}
	if !dt.Valid() {
		return Tensor{}, fmt.Errorf("a2a: %v: %w", dt, ErrDType)
	}
	for _, s := range shape {
		if s < 0 {
			return Tensor{}, fmt.Errorf("a2a: negative dimension in %v: %w", shape, ErrShape)
		}
	}
	n := t.Bytes()
	if n == 0 {
		n = 1 // a real, freeable pointer even for empty tensors
	}
	p, err := d.ctx.MemAlloc(uint64(n))
	if err != nil {
		return Tensor{}, api.WrapDriver(fmt.Sprintf("allocating %d bytes", n), err)
	}
	t.Ptr = uintptr(p)
	return t, nil
}

// Free releases a tensor made by Alloc; the caller must be done with it.
// cuMemFree waits for every kernel on the device, so while this process
// has Comms on the device the memory is released later, when none of
// their kernels runs (at the latest when the last one closes).
func (d *Device) Free(t Tensor) error {
	if err := d.usable("Free"); err != nil {
		return err
	}
	if t.Ptr == 0 {
		return nil
	}
	p := driver.DevicePtr(t.Ptr)
	if s := device.Live(d.info.Ordinal); s != nil {
		s.Bury(device.Release{What: "freeing", Do: func() error { return s.Ctx.MemFree(p) }})
		return s.Put()
	}
	if err := d.ctx.MemFree(p); err != nil {
		return api.WrapDriver("freeing", err)
	}
	return nil
}

// Upload copies src (exactly t.Bytes() long) into t and returns once the
// bytes are on the device: any operation enqueued afterwards reads them.
// If t lies in a Comm's buffer, the Comm's queued operations are waited for
// first (as by all three helpers).
func (d *Device) Upload(t Tensor, src []byte) error {
	if err := d.usable("Upload"); err != nil {
		return err
	}
	if err := checkDense("upload target", t); err != nil {
		return err
	}
	if int64(len(src)) != t.Bytes() {
		return fmt.Errorf("a2a: upload of %d bytes into %v (%d bytes): %w", len(src), t, t.Bytes(), ErrShape)
	}
	if len(src) == 0 {
		return nil
	}
	if err := waitForComms(t); err != nil {
		return err
	}
	err := d.ctx.MemcpyHtoDAsync(driver.DevicePtr(t.Ptr), unsafe.Pointer(&src[0]), uint64(len(src)), d.copies)
	err = d.finish("uploading", err)
	runtime.KeepAlive(src)
	return err
}

// Download returns a copy of t's bytes.
func (d *Device) Download(t Tensor) ([]byte, error) {
	if err := d.usable("Download"); err != nil {
		return nil, err
	}
	b := make([]byte, t.Bytes())
	return b, d.DownloadInto(b, t)
}

// DownloadInto copies t's bytes into dst (exactly t.Bytes() long).
func (d *Device) DownloadInto(dst []byte, t Tensor) error {
	if err := d.usable("DownloadInto"); err != nil {
		return err
	}
	if err := checkDense("download source", t); err != nil {
		return err
	}
	if int64(len(dst)) != t.Bytes() {
		return fmt.Errorf("a2a: download of %v (%d bytes) into %d bytes: %w", t, t.Bytes(), len(dst), ErrShape)
	}
	if len(dst) == 0 {
		return nil
	}
	if err := waitForComms(t); err != nil {
		return err
	}
	err := d.ctx.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), driver.DevicePtr(t.Ptr), uint64(len(dst)), d.copies)
	err = d.finish("downloading", err)
	runtime.KeepAlive(dst)
	return err
}

// Fill sets every byte of t to v (tests use it to poison outputs) and
// returns once it is done on the device.
func (d *Device) Fill(t Tensor, v byte) error {
	if err := d.usable("Fill"); err != nil {
		return err
	}
	if err := checkDense("fill target", t); err != nil {
		return err
	}
	n := t.Bytes()
	if n == 0 {
		return nil
	}
	if err := waitForComms(t); err != nil {
		return err
	}
	return d.finish("filling", d.ctx.MemsetD8Async(driver.DevicePtr(t.Ptr), v, uint64(n), d.copies))
}

// checkDense refuses a strided tensor where only contiguous ones work.
func checkDense(name string, t Tensor) error {
	if t.strided() {
		return fmt.Errorf("a2a: %s %v has a token stride; only the head operations' inputs may: %w", name, t, ErrNotSupported)
	}
	return nil
}

// waitForComms waits for the queued operations of every live Comm of the
// process whose buffer t overlaps (a view, or Comm.Buffer), and returns
// that Comm's failure if it has one: a view of a failed operation holds
// no result. Memory outside every Comm's buffer waits for nothing: Sync
// the Comms that read or write it first.
func waitForComms(t Tensor) error {
	for _, c := range commsTouching(t.Ptr, t.Bytes()) {
		if err := c.waitQueued(); err != nil {
			return api.Wrap(err, "%v lies in the buffer of rank %d's Comm", t, c.cfg.Rank)
		}
	}
	return nil
}
