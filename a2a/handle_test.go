package a2a

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// filledHandle sets every field to a distinct, non-zero value.
func filledHandle() handle {
	h := handle{
		Rank:      2,
		World:     4,
		ElemBytes: 2,
		Blocks:    132,
		Pid:       0x01020304,
		DataBytes: 0x0000_00ab_cdef_0100,
		Nonce:     0x8877_6655_4433_2211,
		DevPtr:    0x7f00_dead_beef_0000,

		SingleBuffer: true,
		Transport:    TransportAuto,
		NReach:       maxReach,
	}
	copy(h.BusID[:], "0000:3b:00.0")
	copy(h.Host[:], "host-identity-16")
	for i := range h.Reach {
		h.Reach[i] = 0xa0b0c000 + uint32(i)
	}
	for i := range h.IPC {
		h.IPC[i] = byte(0xc0 + i)
	}
	for i := range h.Comm {
		h.Comm[i] = byte(0x10 + i)
	}
	return h
}

func TestHandleRoundTrip(t *testing.T) {
	h := filledHandle()
	b := h.encode()
	require.Len(t, b, HandleSize)

	got, err := decodeHandle(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	assert.Equal(t, "0000:3b:00.0", got.busID())
	assert.Equal(t, b, got.encode())

	// Boundaries of every checked field.
	for _, mod := range []func(*handle){
		func(h *handle) { h.World, h.Rank = 1, 0 },
		func(h *handle) { h.World, h.Rank = MaxWorldSize, MaxWorldSize-1 },
		func(h *handle) { h.ElemBytes = 1 },
		func(h *handle) { h.Blocks = 1 },
		func(h *handle) { h.Blocks = maxBlocks },
		func(h *handle) { h.DataBytes = 0 },
		func(h *handle) { h.DataBytes = maxDataBytes },
		func(h *handle) { h.Pid, h.Nonce, h.DevPtr = 0, 0, 0 },
		func(h *handle) { h.BusID, h.IPC = [16]byte{}, [64]byte{} },
		func(h *handle) { h.SingleBuffer = false },
		func(h *handle) { h.Transport = TransportIPC },
		func(h *handle) { h.Transport = TransportNCCL },
		func(h *handle) { h.Host = [16]byte{} },
		func(h *handle) { h.NReach, h.Reach = 0, [maxReach]uint32{} },
		func(h *handle) { h.NReach, h.Reach = 1, [maxReach]uint32{7} },
		func(h *handle) { h.Comm = [16]byte{} },
	} {
		h := filledHandle()
		mod(&h)
		got, err := decodeHandle(h.encode())
		require.NoError(t, err, "%+v", h)
		assert.Equal(t, h, got)
	}
}

// The wire format, byte by byte: the peers of another build must agree.
func TestHandleWireFormat(t *testing.T) {
	h := filledHandle()
	b := h.encode()
	le := binary.LittleEndian
	assert.Equal(t, "ULYH", string(b[0:4]))
	assert.Equal(t, uint16(3), le.Uint16(b[4:]))
	assert.Equal(t, byte(2), b[6])
	assert.Equal(t, byte(1), b[7], "flags: bit 0 is SingleBuffer")
	h.SingleBuffer = false
	assert.Equal(t, byte(0), h.encode()[7], "flags without SingleBuffer")
	assert.Equal(t, uint32(2), le.Uint32(b[8:]))
	assert.Equal(t, uint32(4), le.Uint32(b[12:]))
	assert.Equal(t, uint32(132), le.Uint32(b[16:]))
	assert.Equal(t, uint32(0x01020304), le.Uint32(b[20:]))
	assert.Equal(t, uint64(0x0000_00ab_cdef_0100), le.Uint64(b[24:]))
	assert.Equal(t, uint64(0x8877_6655_4433_2211), le.Uint64(b[32:]))
	assert.Equal(t, uint64(0x7f00_dead_beef_0000), le.Uint64(b[40:]))
	assert.Equal(t, h.BusID[:], b[48:64])
	assert.Equal(t, h.IPC[:], b[64:128])
	assert.Equal(t, h.Host[:], b[128:144])
	assert.Equal(t, byte(TransportAuto), b[144])
	assert.Equal(t, byte(maxReach), b[145])
	assert.Equal(t, []byte{0, 0}, b[146:148], "reserved")
	assert.Equal(t, uint32(0xa0b0c000), le.Uint32(b[148:]))
	assert.Equal(t, uint32(0xa0b0c000+maxReach-1), le.Uint32(b[204:]))
	assert.Equal(t, h.Comm[:], b[208:224])
	assert.Equal(t, 224, HandleSize)
}

func TestHandleFlags(t *testing.T) {
	h := filledHandle()
	b := h.encode()
	for _, flags := range []byte{0, 1} {
		b[7] = flags
		got, err := decodeHandle(b)
		require.NoError(t, err, "flags %#x", flags)
		assert.Equal(t, flags == 1, got.SingleBuffer, "flags %#x", flags)
		assert.Equal(t, b, got.encode(), "flags %#x", flags)
	}
}

func TestHandleBusID(t *testing.T) {
	cases := []struct {
		raw  string
		want string
	}{
		{"", ""},
		{"0000:3b:00.0", "0000:3b:00.0"},
		{"00000000:3b:00.0", "00000000:3b:00.0"}, // all 16 bytes, no NUL
		{"ab\x00cd", "ab"},                       // stops at the first NUL
		{"\x00xyz", ""},
	}
	for _, c := range cases {
		var h handle
		copy(h.BusID[:], c.raw)
		assert.Equal(t, c.want, h.busID(), "%q", c.raw)
		got, err := decodeHandle(withBusID(c.raw))
		require.NoError(t, err)
		assert.Equal(t, c.want, got.busID(), "%q after decode", c.raw)
	}
}

func withBusID(s string) []byte {
	h := filledHandle()
	h.BusID = [16]byte{}
	copy(h.BusID[:], s)
	return h.encode()
}

func TestDecodeHandleErrors(t *testing.T) {
	h0 := filledHandle()
	valid := h0.encode()
	patch := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		f(b)
		return b
	}
	le := binary.LittleEndian
	fromHandle := func(f func(h *handle)) []byte {
		h := filledHandle()
		f(&h)
		return h.encode()
	}
	cases := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"length 0", []byte{}},
		{"length 127", valid[:127]},
		{"length 128 (version 1)", valid[:128]},
		{"length 208 (version 2)", valid[:208]},
		{"length 223", valid[:HandleSize-1]},
		{"length 225", append(append([]byte(nil), valid...), 0)},
		{"length 448", append(append([]byte(nil), valid...), valid...)},
		{"wrong magic", patch(func(b []byte) { copy(b, "ULYX") })},
		{"lower-case magic", patch(func(b []byte) { copy(b, "ulyh") })},
		{"version 0", patch(func(b []byte) { le.PutUint16(b[4:], 0) })},
		{"version 1", patch(func(b []byte) { le.PutUint16(b[4:], 1) })},
		{"version 2", patch(func(b []byte) { le.PutUint16(b[4:], 2) })},
		{"version 4", patch(func(b []byte) { le.PutUint16(b[4:], 4) })},
		{"version 256", patch(func(b []byte) { le.PutUint16(b[4:], 256) })},
		{"unknown flag 2", patch(func(b []byte) { b[7] = 2 })},
		{"unknown flag 0x80", patch(func(b []byte) { b[7] = 0x80 })},
		{"flags 0xff", patch(func(b []byte) { b[7] = 0xff })},
		{"flags 3", patch(func(b []byte) { b[7] = 3 })},
		{"world 0", fromHandle(func(h *handle) { h.World, h.Rank = 0, 0 })},
		{"world 9", fromHandle(func(h *handle) { h.World, h.Rank = 9, 0 })},
		{"world 2^32-1", fromHandle(func(h *handle) { h.World, h.Rank = 0xffffffff, 0 })},
		{"rank == world", fromHandle(func(h *handle) { h.World, h.Rank = 4, 4 })},
		{"rank > world", fromHandle(func(h *handle) { h.World, h.Rank = 2, 7 })},
		{"rank 2^32-1", fromHandle(func(h *handle) { h.Rank = 0xffffffff })},
		{"elem bytes 0", fromHandle(func(h *handle) { h.ElemBytes = 0 })},
		{"elem bytes 3", fromHandle(func(h *handle) { h.ElemBytes = 3 })},
		{"elem bytes 4", fromHandle(func(h *handle) { h.ElemBytes = 4 })},
		{"blocks 0", fromHandle(func(h *handle) { h.Blocks = 0 })},
		{"blocks 1025", fromHandle(func(h *handle) { h.Blocks = maxBlocks + 1 })},
		{"data bytes over limit", fromHandle(func(h *handle) { h.DataBytes = maxDataBytes + 1 })},
		{"data bytes 2^64-1", fromHandle(func(h *handle) { h.DataBytes = ^uint64(0) })},
		{"transport 3", fromHandle(func(h *handle) { h.Transport = TransportAuto + 1 })},
		{"reach 16", patch(func(b []byte) { b[145] = maxReach + 1 })},
		{"reserved byte set", patch(func(b []byte) { b[147] = 1 })},
		{"reach past its count", fromHandle(func(h *handle) { h.NReach = 2 })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeHandle(c.b)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrHandle)
		})
	}
}

func TestProcessNonce(t *testing.T) {
	n := processNonce()
	assert.Equal(t, uint64(1), n&1, "the nonce is never zero: its low bit is set")
	assert.Equal(t, n, processNonce(), "one value per process")
}
