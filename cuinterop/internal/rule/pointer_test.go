package rule

import (
	"errors"
	"strings"
	"testing"

	"github.com/ulysses-go/ulysses/a2a"
)

// primaryMem is 4 KiB of device 1's primary context at 0x7000_0000.
var primaryMem = Pointer{Ptr: 0x7000_0000, Type: MemDevice, Ctx: 0xc1, Device: 1, Base: 0x7000_0000, Size: 4096, Primary: 0xc1}

func TestPointerAccepts(t *testing.T) {
	inside := primaryMem
	inside.Ptr += 1024
	mapped := primaryMem
	mapped.Ctx = 0 // cuMemMap'd or pool memory belongs to no context
	managed := primaryMem
	managed.Type = MemUnified
	for name, c := range map[string]struct {
		p    Pointer
		span int64
	}{
		"whole allocation": {primaryMem, 4096},
		"up to its end":    {inside, 3072},
		"no bytes":         {primaryMem, 0},
		"no context":       {mapped, 4096},
		"unified":          {managed, 16},
	} {
		if err := c.p.Check(c.span); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPointerRefuses(t *testing.T) {
	foreign := primaryMem
	foreign.Ctx = 0xf0
	inactive := foreign
	inactive.Primary = 0
	host := primaryMem
	host.Type = MemHost
	unknown := Pointer{Ptr: 0x1234}
	before := primaryMem
	before.Ptr = primaryMem.Base - 2
	for name, c := range map[string]struct {
		p    Pointer
		span int64
		want error
		says []string
	}{
		"another context":        {foreign, 16, ErrNotPrimaryContext, []string{"context 0xf0 on device 1", "primary context 0xc1", "cu.Device(1).RetainPrimaryCtx()", "cu.NewContext"}},
		"primary context unused": {inactive, 16, ErrNotPrimaryContext, []string{"not active in this process", "cu.Device(1).RetainPrimaryCtx()"}},
		"host memory":            {host, 16, ErrNotDevicePointer, []string{"host memory"}},
		"unknown to the driver":  {unknown, 16, ErrNotDevicePointer, []string{"does not know 0x1234"}},
		"past the end":           {primaryMem, 4097, a2a.ErrShape, []string{"4097 bytes", "allocation of 4096 bytes"}},
		"before the start":       {before, 2, a2a.ErrShape, []string{"run past"}},
	} {
		err := c.p.Check(c.span)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error matching %v", name, err, c.want)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", name, err, s)
			}
		}
	}
}
