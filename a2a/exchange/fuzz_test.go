package exchange

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"
)

// fuzzMaxLimit caps the payload limit the fuzzers pass to decodeFrame.
const fuzzMaxLimit = 1 << 20

// FuzzDecodeFrame feeds decodeFrame arbitrary bytes, and decodeError the
// payload of whatever parses as an error frame.
func FuzzDecodeFrame(f *testing.F) {
	var valid bytes.Buffer
	if err := encodeFrame(&valid, frame{kind: kindHello, rank: 1, world: 2, payload: []byte("handle")}); err != nil {
		f.Fatal(err)
	}
	var result bytes.Buffer
	if err := encodeFrame(&result, frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{[]byte("a"), {}})}); err != nil {
		f.Fatal(err)
	}
	var errFrame bytes.Buffer
	if err := encodeFrame(&errFrame, frame{kind: kindError, world: 2, payload: encodeError(ErrRank, "rank 1 is taken")}); err != nil {
		f.Fatal(err)
	}
	f.Add(valid.Bytes(), uint32(1024))
	f.Add(result.Bytes(), uint32(1024))
	f.Add(errFrame.Bytes(), uint32(1024))
	f.Add(append(header(kindError, 0, 2, 3), 0xfe, 'h', 'i'), uint32(1024)) // unknown error code
	f.Add(header(kindError, 0, 2, 0), uint32(1024))                         // error frame without a code
	f.Add(append(headerVersion(1, kindHello, 1, 2, 1), 'x'), uint32(1024))  // version 1
	f.Add(valid.Bytes()[:headerSize+2], uint32(1024))                       // truncated payload
	f.Add(valid.Bytes()[:7], uint32(1024))                                  // truncated header
	f.Add(header(kindHello, 1, 2, 0xffffffff), uint32(1))                   // huge length
	f.Add(header(kindHello, 1, 2, 0xffffffff), uint32(fuzzMaxLimit))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), uint32(1024)) // bad magic
	f.Add([]byte{}, uint32(0))                            // empty

	f.Fuzz(func(t *testing.T, data []byte, limit uint32) {
		maxPayload := int(limit % (fuzzMaxLimit + 1))
		r := bytes.NewReader(data)
		fr, err := decodeFrame(r, maxPayload)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("error wraps neither ErrProtocol nor ErrFrameTooLarge: %v", err)
			}
			return
		}
		if len(fr.payload) > maxPayload {
			t.Fatalf("payload of %d bytes exceeds limit %d", len(fr.payload), maxPayload)
		}
		consumed := len(data) - r.Len()
		var out bytes.Buffer
		if err := encodeFrame(&out, fr); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(out.Bytes(), data[:consumed]) {
			t.Fatalf("re-encoding differs from the %d consumed bytes:\n got %x\nwant %x", consumed, out.Bytes(), data[:consumed])
		}
		if fr.kind == kindError {
			checkDecodeError(t, fr.payload)
		}
	})
}

// checkDecodeError checks what decodeError makes of an error frame's
// payload p: a bounded, valid UTF-8 message, and ErrProtocol unless p
// starts with a known code.
func checkDecodeError(t *testing.T, p []byte) {
	e := decodeError(p)
	msg := e.Error()
	if len(e.msg) > maxErrorMessage+len(" (unknown error code 255)") {
		t.Fatalf("message of %d bytes from a %d-byte payload", len(e.msg), len(p))
	}
	if !utf8.ValidString(msg) {
		t.Fatalf("invalid UTF-8 in %q", msg)
	}
	if (len(p) == 0 || int(p[0]) >= len(codeSentinels)) && !errors.Is(e, ErrProtocol) {
		t.Fatalf("payload %x without a known code gives %q, not ErrProtocol", p, msg)
	}
}

// FuzzDecodeBlobs feeds decodeBlobs arbitrary bytes and blob counts.
func FuzzDecodeBlobs(f *testing.F) {
	f.Add(encodeBlobs([][]byte{[]byte("rank0"), {}, []byte("rank2")}), uint16(3))
	f.Add(encodeBlobs([][]byte{[]byte("rank0"), []byte("rank1")})[:9], uint16(2)) // truncated
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2}, uint16(1))                        // huge length
	f.Add([]byte{}, uint16(0))                                                    // empty
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, uint16(1))                              // trailing bytes

	f.Fuzz(func(t *testing.T, data []byte, want uint16) {
		blobs, err := decodeBlobs(data, int(want))
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error does not wrap ErrProtocol: %v", err)
			}
			return
		}
		if len(blobs) != int(want) {
			t.Fatalf("got %d blobs, want %d", len(blobs), want)
		}
		if got := encodeBlobs(blobs); !bytes.Equal(got, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, data)
		}
	})
}
