package a2a

import (
	"fmt"
	"strings"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// Device is one CUDA device's primary context (the one the CUDA runtime and
// most bindings use), with memory helpers for users who have no other CUDA
// binding. Its copies are synchronous and wait for all work on the device
// first, so they are for setup and tests, not the hot path.
type Device struct {
	drv  *driver.Driver
	ctx  *driver.Context
	info DeviceInfo
}

// OpenDevice retains the primary context of device ordinal. Close releases it.
func OpenDevice(ordinal int) (*Device, error) {
	return openDevice(&ordinal, 0)
}

func openDevice(ordinal *int, rank int) (*Device, error) {
	drv, err := driver.Load()
	if err != nil {
		return nil, wrapDriver("loading the CUDA driver", err)
	}
	n, err := drv.RequireDevices()
	if err != nil {
		return nil, wrapDriver("counting devices", err)
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
		return nil, wrapDriver("retaining the primary context", err)
	}
	return &Device{drv: drv, ctx: ctx, info: info}, nil
}

// Info describes the device.
func (d *Device) Info() DeviceInfo { return d.info }

// Close releases the context; idempotent.
func (d *Device) Close() error {
	if err := d.ctx.Release(); err != nil {
		return wrapDriver("releasing the context", err)
	}
	return nil
}

// ordinalOfBusID finds the local ordinal of a PCI bus id, or -1.
func (d *Device) ordinalOfBusID(bus string) int {
	n, err := d.drv.DeviceCount()
	if err != nil || bus == "" {
		return -1
	}
	for i := 0; i < n; i++ {
		b, err := d.drv.DevicePCIBusID(i)
		if err == nil && strings.EqualFold(b, bus) {
			return i
		}
	}
	return -1
}

// Alloc allocates an uninitialised tensor on the device.
func (d *Device) Alloc(shape [4]int, dt DType) (Tensor, error) {
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
		return Tensor{}, wrapDriver(fmt.Sprintf("allocating %d bytes", n), err)
	}
	t.Ptr = uintptr(p)
	return t, nil
}

// Free releases a tensor made by Alloc.
func (d *Device) Free(t Tensor) error {
	if t.Ptr == 0 {
		return nil
	}
	if err := d.ctx.MemFree(driver.DevicePtr(t.Ptr)); err != nil {
		return wrapDriver("freeing", err)
	}
	return nil
}

// Upload copies src (exactly t.Bytes() long) into t.
func (d *Device) Upload(t Tensor, src []byte) error {
	if int64(len(src)) != t.Bytes() {
		return fmt.Errorf("a2a: upload of %d bytes into %v (%d bytes): %w", len(src), t, t.Bytes(), ErrShape)
	}
	if len(src) == 0 {
		return nil
	}
	if err := d.ctx.Synchronize(); err != nil {
		return wrapDriver("waiting for the device", err)
	}
	if err := d.ctx.MemcpyHtoD(driver.DevicePtr(t.Ptr), src); err != nil {
		return wrapDriver("uploading", err)
	}
	return nil
}

// Download returns a copy of t's bytes.
func (d *Device) Download(t Tensor) ([]byte, error) {
	b := make([]byte, t.Bytes())
	return b, d.DownloadInto(b, t)
}

// DownloadInto copies t's bytes into dst (exactly t.Bytes() long).
func (d *Device) DownloadInto(dst []byte, t Tensor) error {
	if int64(len(dst)) != t.Bytes() {
		return fmt.Errorf("a2a: download of %v (%d bytes) into %d bytes: %w", t, t.Bytes(), len(dst), ErrShape)
	}
	if len(dst) == 0 {
		return nil
	}
	if err := d.ctx.Synchronize(); err != nil {
		return wrapDriver("waiting for the device", err)
	}
	if err := d.ctx.MemcpyDtoH(dst, driver.DevicePtr(t.Ptr)); err != nil {
		return wrapDriver("downloading", err)
	}
	return nil
}

// Fill sets every byte of t to v (tests use it to poison outputs).
func (d *Device) Fill(t Tensor, v byte) error {
	n := t.Bytes()
	if n == 0 {
		return nil
	}
	if err := d.ctx.Synchronize(); err != nil {
		return wrapDriver("waiting for the device", err)
	}
	if err := d.ctx.MemsetD8Async(driver.DevicePtr(t.Ptr), v, uint64(n), 0); err != nil {
		return wrapDriver("filling", err)
	}
	if err := d.ctx.Synchronize(); err != nil {
		return wrapDriver("filling", err)
	}
	return nil
}
