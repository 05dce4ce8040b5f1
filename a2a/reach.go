package a2a

import (
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
)

// reach lists the hashes of the bus ids of the GPUs this process sees
// that GPU me has peer access with, both ways (at most handle.MaxReach; a GPU
// whose bus id or access cannot be read is left out, which only makes
// TransportAuto choose NCCL).
func reach(drv *driver.Driver, me int) (n uint8, r [handle.MaxReach]uint32) {
	count, err := drv.DeviceCount()
	if err != nil {
		return 0, r
	}
	for o := 0; o < count && int(n) < handle.MaxReach; o++ {
		if o == me {
			continue
		}
		bus, err := drv.DevicePCIBusID(o)
		if err != nil || bus == "" {
			continue
		}
		to, err1 := drv.CanAccessPeer(me, o)
		from, err2 := drv.CanAccessPeer(o, me)
		if err1 == nil && err2 == nil && to && from {
			r[n] = handle.BusHash(bus)
			n++
		}
	}
	return n, r
}
