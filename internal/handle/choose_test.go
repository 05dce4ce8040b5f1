package handle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulysses-go/ulysses/internal/api"
)

// autoHandles is a group of world handles asking for TransportAuto on
// one host, rank i on GPU "0000:0i:00.0", each reaching every other GPU.
func autoHandles(world int) []Handle {
	hs := make([]Handle, world)
	bus := func(i int) string { return "0000:0" + string(rune('0'+i)) + ":00.0" }
	for i := range hs {
		hs[i] = Handle{Rank: uint32(i), World: uint32(world), Transport: api.TransportAuto, Host: [16]byte{1, 2, 3}}
		copy(hs[i].BusID[:], bus(i))
		for j := range world {
			if j != i {
				hs[i].Reach[hs[i].NReach] = BusHash(bus(j))
				hs[i].NReach++
			}
		}
	}
	return hs
}

// TestChooseTransport: the verdict from the handles alone, so the same on
// every rank.
func TestChooseTransport(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(hs []Handle)
		want api.Transport
	}{
		{"one host, every pair reaches", func([]Handle) {}, api.TransportIPC},
		{"another host", func(hs []Handle) { hs[2].Host[0] = 9 }, api.TransportNCCL},
		{"one way only", func(hs []Handle) { hs[1].NReach, hs[1].Reach = 0, [MaxReach]uint32{} }, api.TransportNCCL},
		{"two ranks on one GPU", func(hs []Handle) {
			hs[1].BusID = hs[0].BusID
			hs[1].Reach = hs[0].Reach
		}, api.TransportIPC},
		{"bus ids of another case", func(hs []Handle) { copy(hs[0].BusID[:], "0000:0A:00.0") }, api.TransportNCCL},
		{"all ask for NCCL", func(hs []Handle) {
			for i := range hs {
				hs[i].Transport = api.TransportNCCL
			}
		}, api.TransportNCCL},
		{"all ask for IPC, across hosts", func(hs []Handle) {
			for i := range hs {
				hs[i].Transport, hs[i].Host[0] = api.TransportIPC, byte(i)
			}
		}, api.TransportIPC},
	} {
		hs := autoHandles(3)
		tc.mod(hs)
		got, err := Choose(hs)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	hs := autoHandles(3)
	hs[2].Transport = api.TransportNCCL
	_, err := Choose(hs)
	require.ErrorIs(t, err, api.ErrHandle)
	assert.ErrorContains(t, err, "rank 2 asks for transport nccl, rank 0 for auto")
}

func TestBusHash(t *testing.T) {
	assert.Equal(t, BusHash("0000:3B:00.0"), BusHash("0000:3b:00.0"))
	assert.NotEqual(t, BusHash("0000:3b:00.0"), BusHash("0000:3c:00.0"))
	assert.NotZero(t, BusHash(""))
}

func TestHostIdentity(t *testing.T) {
	id := HostIdentity()
	assert.NotEqual(t, [16]byte{}, id)
	assert.Equal(t, id, HostIdentity(), "one value per process")
}
