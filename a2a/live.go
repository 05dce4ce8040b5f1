package a2a

import (
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// commsTouching returns the live Comms, on any device, whose buffer
// overlaps [ptr, ptr+n).
func commsTouching(ptr uintptr, n int64) []*Comm {
	return liveComms(func(c *Comm) bool { return plan.Overlaps(ptr, n, uintptr(c.buf), c.layout.Total) })
}

// liveComms returns the live Comms of the process, on any device, for
// which match holds. match runs with the Comm's share locked, while its
// buffer and layout cannot change.
func liveComms(match func(*Comm) bool) []*Comm {
	var out []*Comm
	for _, m := range device.Members(func(m *device.Member) bool { return match(m.Owner.(*Comm)) }) {
		out = append(out, m.Owner.(*Comm))
	}
	return out
}
