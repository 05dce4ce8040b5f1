package transport_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/internal/transport/transporttest"

	_ "github.com/ulysses-go/ulysses/internal/transport/ipc"
	_ "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// boxCopy is what CopyBox must do, on the host: c's slices of rows, from
// src laid out as from into dst laid out as to.
func boxCopy(dst, src []byte, to, from plan.BoxSide, c plan.Box) {
	for z := range c.Depth {
		for y := range c.Rows {
			s := from.Off + (z*from.Height+y)*from.Pitch
			d := to.Off + (z*to.Height+y)*to.Pitch
			copy(dst[d:d+c.Width], src[s:s+c.Width])
		}
	}
}

// CopyBox moves a box's bytes, and only them, whether both sides are
// contiguous (one linear copy) or either has gaps between rows or slices
// (one pitched 3D copy): the stub driver moves host memory for real.
func TestCopyBox(t *testing.T) {
	d := transporttest.NewDevice(t)
	ctx, s := d.Share.Ctx, d.NewRank(t, 0, 1, 1<<12).Stream
	for _, c := range []struct {
		name     string
		box      plan.Box
		from, to plan.BoxSide
	}{
		{"linear", plan.Box{Width: 64, Rows: 5, Depth: 2}, plan.BoxSide{Pitch: 64, Height: 5}, plan.BoxSide{Off: 8, Pitch: 64, Height: 5}},
		{"pitched source", plan.Box{Width: 16, Rows: 3, Depth: 2}, plan.BoxSide{Off: 32, Pitch: 96, Height: 4}, plan.BoxSide{Pitch: 16, Height: 3}},
		{"pitched both", plan.Box{Width: 24, Rows: 4, Depth: 3}, plan.BoxSide{Off: 8, Pitch: 40, Height: 4}, plan.BoxSide{Off: 48, Pitch: 72, Height: 6}},
		{"slices apart", plan.Box{Width: 32, Rows: 2, Depth: 2}, plan.BoxSide{Pitch: 32, Height: 3}, plan.BoxSide{Pitch: 32, Height: 2}},
	} {
		const n = 2048
		src := transporttest.Pattern(n, 1)
		in, out := d.Alloc(t, n, src), d.Alloc(t, n, make([]byte, n))
		want := make([]byte, n)
		boxCopy(want, src, c.to, c.from, c.box)
		err := transport.CopyBox(ctx, out+driver.DevicePtr(c.to.Off), c.to, in+driver.DevicePtr(c.from.Off), c.from, c.box, s)
		require.NoError(t, err, c.name)
		require.NoError(t, ctx.StreamSynchronize(s))
		assert.Equal(t, want, d.Bytes(t, out, n), c.name)
	}
}

// Both transports register a factory for their kind when imported, and
// every kind there is but TransportAuto has one.
func TestTransportsRegistered(t *testing.T) {
	assert.Equal(t, []api.Transport{api.TransportIPC, api.TransportNCCL}, transport.Registered())
	for k := api.Transport(0); k.Known(); k++ {
		if k != api.TransportAuto {
			assert.Contains(t, transport.Registered(), k, "%v has no factory", k)
		}
	}
}

// The NCCL factory needs rank 0's unique id, and says so before it loads
// anything; then it loads NCCL with the loader it is given.
func TestNCCLFactoryNeedsID(t *testing.T) {
	loads, missing := 0, errors.New("no NCCL here")
	load := func() (*nccl.Library, error) { loads++; return nil, missing }
	_, err := transport.New(api.TransportNCCL, &transport.Env{Rank: 2}, transport.Options{LoadNCCL: load})
	assert.ErrorIs(t, err, api.ErrConfig)
	assert.ErrorContains(t, err, "rank 2")
	assert.Zero(t, loads)
	id := nccl.UniqueID{}
	_, err = transport.New(api.TransportNCCL, &transport.Env{Rank: 2}, transport.Options{NCCLID: &id, LoadNCCL: load})
	assert.ErrorIs(t, err, missing, "the loader's failure")
	assert.ErrorContains(t, err, "loading NCCL")
	assert.Equal(t, 1, loads)
}

// OrdinalOfBus finds a device of the stub by its PCI bus id, in any case,
// and no device for an id it does not have.
func TestOrdinalOfBus(t *testing.T) {
	d := transporttest.NewDevice(t, fakecuda.EnvDevices+"=12")
	e := d.NewRank(t, 0, 1, 1<<12).Env
	assert.Equal(t, 0, e.OrdinalOfBus(e.BusID))
	assert.Equal(t, 1, e.OrdinalOfBus("0000:01:00.0"))
	assert.Equal(t, 10, e.OrdinalOfBus("0000:0a:00.0"), "the stub names it 0000:0A:00.0")
	assert.Equal(t, -1, e.OrdinalOfBus("0000:7f:00.0"))
	assert.Equal(t, -1, e.OrdinalOfBus(""))
	require.NoError(t, e.Finish("nothing", nil))
	assert.ErrorContains(t, e.Finish("copying", errBoom{}), "boom")
}

type errBoom struct{}

func (errBoom) Error() string { return "boom" }
