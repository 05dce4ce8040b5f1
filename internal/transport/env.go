package transport

import (
	"strings"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// Env is what a transport is built from: the Comm's device, stream and
// buffer, and its part of the Config. The Comm makes one at Connect.
type Env struct {
	Driver  *driver.Driver
	Ctx     *driver.Context // the device's primary context
	Share   *device.Share
	SMs     int
	BusID   string        // the device's PCI bus id
	Helpers driver.Stream // the device helpers' stream: short copies the caller waits for
	Stream  driver.Stream // the Comm's own

	Buf    driver.DevicePtr // the Comm's buffer
	Layout plan.Layout

	Rank, World int
	DType       api.DType
	Mover       api.Mover
	Wire        api.Wire
	Timeout     time.Duration
	Blocks      int // this rank's wish of thread blocks
}

// Finish waits for the helpers' stream after err-free work on it, and
// gives a failure the package's prefix.
func (e *Env) Finish(what string, err error) error {
	return device.SyncAfter(e.Ctx, e.Helpers, what, err)
}

// OrdinalOfBus finds the local ordinal of a PCI bus id, or -1.
func (e *Env) OrdinalOfBus(bus string) int {
	n, err := e.Driver.DeviceCount()
	if err != nil || bus == "" {
		return -1
	}
	for i := 0; i < n; i++ {
		b, err := e.Driver.DevicePCIBusID(i)
		if err == nil && strings.EqualFold(b, bus) {
			return i
		}
	}
	return -1
}
