package a2a

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// NewStream makes a non-blocking stream on the device, for callers with no
// other CUDA binding who want Comm.On or CaptureGraph. It waits for
// nothing. Destroy it with DestroyStream.
func (d *Device) NewStream() (Stream, error) {
	if err := d.usable("NewStream"); err != nil {
		return 0, err
	}
	s, err := d.ctx.StreamCreate(true)
	if err != nil {
		return 0, api.WrapDriver("creating a stream", err)
	}
	return Stream(s), nil
}

// SyncStream waits until all work queued on s is done.
func (d *Device) SyncStream(s Stream) error {
	if err := d.usable("SyncStream"); err != nil {
		return err
	}
	if err := d.ctx.StreamSynchronize(driver.Stream(s)); err != nil {
		return api.WrapDriver("waiting for a stream", err)
	}
	return nil
}

// DestroyStream destroys a stream made by NewStream once its queued work
// is done; it does not wait.
func (d *Device) DestroyStream(s Stream) error {
	if err := d.usable("DestroyStream"); err != nil {
		return err
	}
	if err := d.ctx.StreamDestroy(driver.Stream(s)); err != nil {
		return api.WrapDriver("destroying a stream", err)
	}
	return nil
}
