package handle

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/fdshare"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// filledHandle sets every field to a distinct, non-zero value.
func filledHandle() Handle {
	h := Handle{
		Rank:      2,
		World:     4,
		ElemBytes: 2,
		Blocks:    132,
		Pid:       0x01020304,
		DataBytes: 0x0000_00ab_cdef_0100,
		Nonce:     0x8877_6655_4433_2211,
		DevPtr:    0x7f00_dead_beef_0000,

		SingleBuffer: true,
		Transport:    api.TransportAuto,
		NReach:       MaxReach,
	}
	copy(h.BusID[:], "0000:3b:00.0")
	copy(h.Host[:], "host-identity-16")
	for i := range h.Reach {
		h.Reach[i] = 0xa0b0c000 + uint32(i)
	}
	for i := range h.IPC {
		h.IPC[i] = byte(0xc0 + i)
	}
	for i := range h.ID {
		h.ID[i] = byte(0x10 + i)
	}
	return h
}

func TestHandleRoundTrip(t *testing.T) {
	h := filledHandle()
	b := h.Encode()
	require.Len(t, b, Size)

	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	assert.Equal(t, "0000:3b:00.0", got.Bus())
	assert.Equal(t, b, got.Encode())

	// Boundaries of every checked field.
	for _, mod := range []func(*Handle){
		func(h *Handle) { h.World, h.Rank = 1, 0 },
		func(h *Handle) { h.World, h.Rank = kernelabi.MaxRanks, kernelabi.MaxRanks-1 },
		func(h *Handle) { h.ElemBytes = 1 },
		func(h *Handle) { h.Blocks = 1 },
		func(h *Handle) { h.Blocks = kernelabi.MaxBlocks },
		func(h *Handle) { h.DataBytes = 0 },
		func(h *Handle) { h.DataBytes = plan.MaxDataBytes },
		func(h *Handle) { h.Pid, h.Nonce, h.DevPtr = 0, 0, 0 },
		func(h *Handle) { h.BusID, h.IPC = [16]byte{}, [64]byte{} },
		func(h *Handle) { h.SingleBuffer = false },
		func(h *Handle) { h.Transport = api.TransportIPC },
		func(h *Handle) { h.Transport = api.TransportNCCL },
		func(h *Handle) { h.Host = [16]byte{} },
		func(h *Handle) { h.NReach, h.Reach = 0, [MaxReach]uint32{} },
		func(h *Handle) { h.NReach, h.Reach = 1, [MaxReach]uint32{7} },
	} {
		h := filledHandle()
		mod(&h)
		got, err := Decode(h.Encode())
		require.NoError(t, err, "%+v", h)
		assert.Equal(t, h, got)
	}
}

// The wire format, byte by byte: the peers of another build must agree.
func TestHandleWireFormat(t *testing.T) {
	h := filledHandle()
	b := h.Encode()
	le := binary.LittleEndian
	assert.Equal(t, "ULYH", string(b[0:4]))
	assert.Equal(t, uint16(5), le.Uint16(b[4:]))
	assert.Equal(t, byte(2), b[6])
	assert.Equal(t, byte(1), b[7], "flags: bit 0 is SingleBuffer")
	h.SingleBuffer = false
	assert.Equal(t, byte(0), h.Encode()[7], "flags without SingleBuffer")
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
	assert.Equal(t, byte(api.TransportAuto), b[144])
	assert.Equal(t, byte(MaxReach), b[145])
	assert.Equal(t, []byte{0, 0}, b[146:148], "reserved")
	assert.Equal(t, uint32(0xa0b0c000), le.Uint32(b[148:]))
	assert.Equal(t, uint32(0xa0b0c000+MaxReach-1), le.Uint32(b[148+4*(MaxReach-1):]))
	assert.Equal(t, h.ID[:], b[208:224], "the buffer's ID")
	assert.Len(t, b, Size)
}

func TestHandleFlags(t *testing.T) {
	h := filledHandle()
	b := h.Encode()
	for _, flags := range []byte{0, 1} {
		b[7] = flags
		got, err := Decode(b)
		require.NoError(t, err, "flags %#x", flags)
		assert.Equal(t, flags == 1, got.SingleBuffer, "flags %#x", flags)
		assert.Equal(t, b, got.Encode(), "flags %#x", flags)
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
		var h Handle
		copy(h.BusID[:], c.raw)
		assert.Equal(t, c.want, h.Bus(), "%q", c.raw)
		got, err := Decode(withBusID(c.raw))
		require.NoError(t, err)
		assert.Equal(t, c.want, got.Bus(), "%q after decode", c.raw)
	}
}

func withBusID(s string) []byte {
	h := filledHandle()
	h.BusID = [16]byte{}
	copy(h.BusID[:], s)
	return h.Encode()
}

func TestDecodeHandleErrors(t *testing.T) {
	h0 := filledHandle()
	valid := h0.Encode()
	patch := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		f(b)
		return b
	}
	le := binary.LittleEndian
	fromHandle := func(f func(h *Handle)) []byte {
		h := filledHandle()
		f(&h)
		return h.Encode()
	}
	cases := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"length 0", []byte{}},
		{"length 127", valid[:127]},
		{"length 128 (version 1)", valid[:128]},
		{"length 207", valid[:Size-1]},
		{"length 209", append(append([]byte(nil), valid...), 0)},
		{"length 416", append(append([]byte(nil), valid...), valid...)},
		{"wrong magic", patch(func(b []byte) { copy(b, "ULYX") })},
		{"lower-case magic", patch(func(b []byte) { copy(b, "ulyh") })},
		{"version 0", patch(func(b []byte) { le.PutUint16(b[4:], 0) })},
		{"version 1", patch(func(b []byte) { le.PutUint16(b[4:], 1) })},
		{"version 2", patch(func(b []byte) { le.PutUint16(b[4:], 2) })},
		{"version 3", patch(func(b []byte) { le.PutUint16(b[4:], 3) })},
		{"version 4", patch(func(b []byte) { le.PutUint16(b[4:], 4) })},
		{"version 6", patch(func(b []byte) { le.PutUint16(b[4:], 6) })},
		{"version 256", patch(func(b []byte) { le.PutUint16(b[4:], 256) })},
		{"unknown flag 2", patch(func(b []byte) { b[7] = 2 })},
		{"unknown flag 0x80", patch(func(b []byte) { b[7] = 0x80 })},
		{"flags 0xff", patch(func(b []byte) { b[7] = 0xff })},
		{"flags 3", patch(func(b []byte) { b[7] = 3 })},
		{"world 0", fromHandle(func(h *Handle) { h.World, h.Rank = 0, 0 })},
		{"world 9", fromHandle(func(h *Handle) { h.World, h.Rank = 9, 0 })},
		{"world 2^32-1", fromHandle(func(h *Handle) { h.World, h.Rank = 0xffffffff, 0 })},
		{"rank == world", fromHandle(func(h *Handle) { h.World, h.Rank = 4, 4 })},
		{"rank > world", fromHandle(func(h *Handle) { h.World, h.Rank = 2, 7 })},
		{"rank 2^32-1", fromHandle(func(h *Handle) { h.Rank = 0xffffffff })},
		{"elem bytes 0", fromHandle(func(h *Handle) { h.ElemBytes = 0 })},
		{"elem bytes 3", fromHandle(func(h *Handle) { h.ElemBytes = 3 })},
		{"elem bytes 4", fromHandle(func(h *Handle) { h.ElemBytes = 4 })},
		{"blocks 0", fromHandle(func(h *Handle) { h.Blocks = 0 })},
		{"blocks 1025", fromHandle(func(h *Handle) { h.Blocks = kernelabi.MaxBlocks + 1 })},
		{"data bytes over limit", fromHandle(func(h *Handle) { h.DataBytes = plan.MaxDataBytes + 1 })},
		{"data bytes 2^64-1", fromHandle(func(h *Handle) { h.DataBytes = ^uint64(0) })},
		{"transport 3", fromHandle(func(h *Handle) { h.Transport = api.TransportAuto + 1 })},
		{"reach 16", patch(func(b []byte) { b[145] = MaxReach + 1 })},
		{"reserved byte set", patch(func(b []byte) { b[147] = 1 })},
		{"reach past its count", fromHandle(func(h *Handle) { h.NReach = 2 })},
		{"fd without a directory", fromHandle(func(h *Handle) { h.Shared, h.IPC = SharedFD, [64]byte{} })},
		{"fd with a relative directory", fromHandle(func(h *Handle) { h.Shared = SharedFD; h.SetFDDir("tmp/x") })},
		{"fd with bytes after the directory", fromHandle(func(h *Handle) {
			h.Shared = SharedFD
			h.SetFDDir("/tmp/x")
			h.IPC[40] = 'y'
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.b)
			require.Error(t, err)
			assert.ErrorIs(t, err, api.ErrHandle)
		})
	}
}

func TestProcessNonce(t *testing.T) {
	n := ProcessNonce()
	assert.Equal(t, uint64(1), n&1, "the nonce is never zero: its low bit is set")
	assert.Equal(t, n, ProcessNonce(), "one value per process")
}

// The handle's version names the signal area peers write after the data
// half it carries (Connect compares only DataBytes; the local state past
// the signal area is no peer's business): a build whose signal area
// differs must not pass as a peer. A change to it needs a new
// handleVersion and its line here.
func TestVersionNamesTheSignalArea(t *testing.T) {
	byVersion := map[uint16]int64{
		4: 131104 + 8*1024*4, // the fp8 wire's landing words after the bye words
		5: 131104 + 8*1024*4, // SharedFD's directory: the same signal area
	}
	want, ok := byVersion[handleVersion]
	require.True(t, ok, "handle version %d has no signal area here", handleVersion)
	assert.Equal(t, want, plan.SignalAreaBytes, "the signal area changed: bump handleVersion")
}

// TestFDDir: a SharedFD handle carries its socket's directory through
// the wire format, up to the payload's 64 bytes; the other kinds carry
// none.
func TestFDDir(t *testing.T) {
	h := filledHandle()
	h.Shared = SharedFD
	require.True(t, h.SetFDDir("/tmp/ulysses-fd-42"))
	got, err := Decode(h.Encode())
	require.NoError(t, err)
	assert.Equal(t, "/tmp/ulysses-fd-42", got.FDDir())
	long := "/" + strings.Repeat("d", len(h.IPC)-1)
	require.True(t, h.SetFDDir(long), "64 bytes fill the payload, without a NUL")
	got, err = Decode(h.Encode())
	require.NoError(t, err)
	assert.Equal(t, long, got.FDDir())
	assert.False(t, h.SetFDDir(long+"d"), "65 bytes do not fit")
	assert.False(t, h.SetFDDir("/tmp/a\x00b"), "a NUL would cut the path")
	assert.Equal(t, long, h.FDDir(), "a refused directory changes nothing")
	h.Shared = SharedLegacyIPC
	assert.Empty(t, h.FDDir())
	assert.Equal(t, fdshare.MaxDirLen, len(h.IPC), "every socket directory fdshare makes fits")
}
