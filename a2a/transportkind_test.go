package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransportString(t *testing.T) {
	assert.Equal(t, "ipc", TransportIPC.String())
	assert.Equal(t, "nccl", TransportNCCL.String())
	assert.Equal(t, "auto", TransportAuto.String())
	assert.Equal(t, "Transport(?)", Transport(3).String())
	assert.Equal(t, TransportIPC, Config{}.Transport, "the zero value is today's IPC")
}

// autoHandles is a group of world handles asking for TransportAuto on
// one host, rank i on GPU "0000:0i:00.0", each reaching every other GPU.
func autoHandles(world int) []handle {
	hs := make([]handle, world)
	bus := func(i int) string { return "0000:0" + string(rune('0'+i)) + ":00.0" }
	for i := range hs {
		hs[i] = handle{Rank: uint32(i), World: uint32(world), Transport: TransportAuto, Host: [16]byte{1, 2, 3}}
		copy(hs[i].BusID[:], bus(i))
		for j := range world {
			if j != i {
				hs[i].Reach[hs[i].NReach] = busHash(bus(j))
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
		mod  func(hs []handle)
		want Transport
	}{
		{"one host, every pair reaches", func([]handle) {}, TransportIPC},
		{"another host", func(hs []handle) { hs[2].Host[0] = 9 }, TransportNCCL},
		{"one way only", func(hs []handle) { hs[1].NReach, hs[1].Reach = 0, [maxReach]uint32{} }, TransportNCCL},
		{"two ranks on one GPU", func(hs []handle) {
			hs[1].BusID = hs[0].BusID
			hs[1].Reach = hs[0].Reach
		}, TransportIPC},
		{"bus ids of another case", func(hs []handle) { copy(hs[0].BusID[:], "0000:0A:00.0") }, TransportNCCL},
		{"all ask for NCCL", func(hs []handle) {
			for i := range hs {
				hs[i].Transport = TransportNCCL
			}
		}, TransportNCCL},
		{"all ask for IPC, across hosts", func(hs []handle) {
			for i := range hs {
				hs[i].Transport, hs[i].Host[0] = TransportIPC, byte(i)
			}
		}, TransportIPC},
	} {
		hs := autoHandles(3)
		tc.mod(hs)
		got, err := chooseTransport(hs)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	hs := autoHandles(3)
	hs[2].Transport = TransportNCCL
	_, err := chooseTransport(hs)
	require.ErrorIs(t, err, ErrHandle)
	assert.ErrorContains(t, err, "rank 2 asks for transport nccl, rank 0 for auto")
}

func TestBusHash(t *testing.T) {
	assert.Equal(t, busHash("0000:3B:00.0"), busHash("0000:3b:00.0"))
	assert.NotEqual(t, busHash("0000:3b:00.0"), busHash("0000:3c:00.0"))
	assert.NotZero(t, busHash(""))
}

func TestHostIdentity(t *testing.T) {
	id := hostIdentity()
	assert.NotEqual(t, [16]byte{}, id)
	assert.Equal(t, id, hostIdentity(), "one value per process")
}
