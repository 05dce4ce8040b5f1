package exchange

import (
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, f := range []frame{
		{kind: kindHello, rank: 3, world: 8, payload: []byte{}},
		{kind: kindHello, rank: 1, world: 2, payload: []byte{0x42}},
		{kind: kindResult, rank: 0, world: 1024, payload: randBytes(1000)},
		{kind: kindError, rank: 0, world: 4, payload: encodeError(ErrRank, "boom")},
		{kind: kindHello, rank: math.MaxUint32, world: math.MaxUint32, payload: randBytes(300 << 10)}, // chunked read path
	} {
		b := frameBytes(t, f)
		require.Len(t, b, headerSize+len(f.payload))
		assert.Equal(t, header(f.kind, f.rank, f.world, uint32(len(f.payload))), b[:headerSize])

		// Also read it through a reader that returns short reads, followed
		// by unrelated bytes that must not be consumed.
		r := io.MultiReader(iotest.HalfReader(bytes.NewReader(b)), bytes.NewReader([]byte("next")))
		got, err := decodeFrame(r, len(f.payload))
		require.NoError(t, err)
		assert.Equal(t, f.kind, got.kind)
		assert.Equal(t, f.rank, got.rank)
		assert.Equal(t, f.world, got.world)
		assert.NotNil(t, got.payload)
		assert.True(t, bytes.Equal(f.payload, got.payload))
		rest, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, "next", string(rest))
	}
}

func TestDecodeFrameErrors(t *testing.T) {
	valid := frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: []byte("hello world")})
	withVersion := func(v byte) []byte {
		b := bytes.Clone(valid)
		b[5] = v
		return b
	}
	withKind := func(k byte) []byte {
		b := bytes.Clone(valid)
		b[7] = k
		return b
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		max     int
		want    error
		notWant error
		msg     []string
	}{
		{"empty", nil, 100, ErrProtocol, nil, []string{"closed before a frame header"}},
		{"magic only", []byte("ULYX"), 100, ErrProtocol, nil, []string{"truncated frame header", "got 4 of 20"}},
		{"truncated header", valid[:13], 100, ErrProtocol, nil, []string{"truncated frame header", "got 13 of 20"}},
		{"short bad magic", []byte("GE"), 100, ErrProtocol, nil, []string{"truncated"}},
		{"bad magic", append([]byte("GET / HTTP/1.1\r\n"), valid...), 100, ErrProtocol, nil, []string{"bad magic", `"GET "`}},
		{"version 0", withVersion(0), 100, ErrProtocol, nil, []string{"unsupported version 0, want 3"}},
		{"version 1 (before error codes)", withVersion(1), 100, ErrProtocol, nil, []string{"unsupported version 1, want 3"}},
		{"version 2 (before authentication)", withVersion(2), 100, ErrProtocol, nil, []string{"unsupported version 2, want 3"}},
		{"version 4", withVersion(4), 100, ErrProtocol, nil, []string{"unsupported version 4, want 3"}},
		{"kind 0", withKind(0), 100, ErrProtocol, nil, []string{"unknown frame kind 0"}},
		{"kind 9", withKind(9), 100, ErrProtocol, nil, []string{"unknown frame kind 9"}},
		{"truncated payload", valid[:len(valid)-3], 100, ErrProtocol, io.ErrUnexpectedEOF, []string{"truncated payload", "got 8 of 11"}},
		{"too large", valid, 10, ErrFrameTooLarge, ErrProtocol, []string{"11 payload bytes", "limit is 10"}},
		{"negative limit", valid, -5, ErrFrameTooLarge, ErrProtocol, []string{"limit is 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := decodeFrame(bytes.NewReader(tc.in), tc.max)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			if tc.notWant == ErrProtocol {
				assert.NotErrorIs(t, err, ErrProtocol)
			} else if tc.notWant != nil {
				assert.ErrorIs(t, err, tc.notWant)
			}
			assert.Equal(t, frame{}, f)
			for _, m := range tc.msg {
				assert.Contains(t, err.Error(), m)
			}
			assertInnerError(t, err, tc.want)
		})
	}
	t.Run("empty wraps EOF", func(t *testing.T) {
		_, err := decodeFrame(bytes.NewReader(nil), 10)
		assert.ErrorIs(t, err, io.EOF)
	})
}

func TestDecodeFrameReaderError(t *testing.T) {
	boom := errors.New("boom")
	valid := frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: []byte("payload")})
	for _, n := range []int{0, 2, 10, headerSize + 3} {
		r := io.MultiReader(bytes.NewReader(valid[:n]), iotest.ErrReader(boom))
		_, err := decodeFrame(r, 100)
		require.ErrorIs(t, err, boom, "after %d bytes", n)
		assert.NotErrorIs(t, err, ErrProtocol, "a reader failure is not the peer's fault")
	}
}

// TestDecodeFrameHugeLength checks that a 4 GiB length field with a tiny
// body neither allocates the announced size nor panics, whatever the limit.
func TestDecodeFrameHugeLength(t *testing.T) {
	hdr := header(kindHello, 1, 2, math.MaxUint32)
	for _, tc := range []struct {
		max  int
		want error
		msg  string
	}{
		{1 << 20, ErrFrameTooLarge, "4294967295 payload bytes, limit is 1048576"},
		{math.MaxInt, ErrProtocol, "truncated payload"},
	} {
		r := io.MultiReader(bytes.NewReader(hdr), bytes.NewReader([]byte("tiny")))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := decodeFrame(r, tc.max)
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.msg)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20),
			"decodeFrame allocated %d bytes for a 4-byte body", after.TotalAlloc-before.TotalAlloc)
	}
}

// TestDecodeFrameHoldsWhatArrived: a frame that announces 1 MiB and stalls
// half way holds about what arrived (at most readChunk more), not the
// announced size nor twice what arrived.
func TestDecodeFrameHoldsWhatArrived(t *testing.T) {
	const announced, sent = 1 << 20, 512 << 10
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := decodeFrame(pr, announced)
		done <- err
	}()
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := pw.Write(header(kindBlob, 1, 2, announced))
	require.NoError(t, err)
	chunk := make([]byte, 4096)
	for n := 0; n < sent; n += len(chunk) {
		_, err := pw.Write(chunk) // returns once decodeFrame has read it
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	grew := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d KiB for %d KiB received of a %d KiB frame", grew>>10, sent>>10, announced>>10)
	assert.Less(t, grew, int64(sent+readChunk+32<<10), "decodeFrame holds more than what arrived plus one chunk")
	require.NoError(t, pw.CloseWithError(io.ErrUnexpectedEOF))
	err = <-done
	require.ErrorIs(t, err, ErrProtocol)
	assert.Contains(t, err.Error(), "got 524288 of 1048576 bytes")
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestEncodeFrameWriteError(t *testing.T) {
	boom := errors.New("boom")
	err := encodeFrame(failWriter{boom}, frame{kind: kindHello, payload: []byte("x")})
	require.ErrorIs(t, err, boom)
	assertInnerError(t, err, boom)
	assert.Contains(t, err.Error(), "write frame (kind 1, 21 bytes)")
}

func TestBlobsRoundTrip(t *testing.T) {
	for _, blobs := range [][][]byte{
		{},
		{{}},
		{{}, {}, {}},
		{[]byte("a"), {}, randBytes(1000), randBytes(64)},
	} {
		p := encodeBlobs(blobs)
		want := 0
		for _, b := range blobs {
			want += 4 + len(b)
		}
		require.Len(t, p, want)
		got, err := decodeBlobs(p, len(blobs))
		require.NoError(t, err)
		requireBlobs(t, blobs, got)

		// The decoded blobs are copies: scribbling on p changes nothing,
		// and appending to one blob does not overwrite the next.
		for i := range p {
			p[i] ^= 0xff
		}
		requireBlobs(t, blobs, got)
		if len(got) > 1 {
			_ = append(got[0], 0xAA, 0xBB, 0xCC, 0xDD, 0xEE)
			requireBlobs(t, blobs, got)
		}
	}
	assert.Equal(t, []byte{0, 0, 0, 2, 'h', 'i', 0, 0, 0, 0}, encodeBlobs([][]byte{[]byte("hi"), nil}))
}

func TestDecodeBlobsErrors(t *testing.T) {
	two := encodeBlobs([][]byte{[]byte("ab"), []byte("cde")})
	for _, tc := range []struct {
		name string
		p    []byte
		want int
		msg  string
	}{
		{"negative count", two, -1, "asked for -1 blobs"},
		{"too many for size", two, 4, "cannot hold 4 blobs"},
		{"huge count", nil, math.MaxInt, "cannot hold"},
		{"fewer than present", two, 1, "trailing bytes"},
		{"more than present", append(bytes.Clone(two), 0, 0, 0), 3, "truncated at blob 2"},
		{"blob overruns", two[:len(two)-1], 2, "blob 1 of 2 claims 3 bytes, only 2 left"},
		{"empty but want one", []byte{}, 1, "cannot hold 1 blobs"},
		{"length overflow", []byte{0xff, 0xff, 0xff, 0xff}, 1, "claims 4294967295 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeBlobs(tc.p, tc.want)
			require.ErrorIs(t, err, ErrProtocol)
			assertInnerError(t, err, ErrProtocol)
			assert.Nil(t, got)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	got, err := decodeBlobs(nil, 0)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestFormatRanks(t *testing.T) {
	assert.Equal(t, "[]", formatRanks(nil))
	assert.Equal(t, "[1]", formatRanks([]int{1}))
	assert.Equal(t, "[1 3-5 7-8]", formatRanks([]int{1, 3, 4, 5, 7, 8}))
}
