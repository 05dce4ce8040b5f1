package exchange

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzMaxLimit caps the payload limit the fuzzers pass to DecodeFrame.
const fuzzMaxLimit = 1 << 20

func FuzzDecodeFrame(f *testing.F) {
	var valid bytes.Buffer
	if err := EncodeFrame(&valid, Frame{Kind: KindHello, Rank: 1, World: 2, Payload: []byte("handle")}); err != nil {
		f.Fatal(err)
	}
	var result bytes.Buffer
	if err := EncodeFrame(&result, Frame{Kind: KindResult, World: 2, Payload: EncodeBlobs([][]byte{[]byte("a"), {}})}); err != nil {
		f.Fatal(err)
	}
	f.Add(valid.Bytes(), uint32(1024))
	f.Add(result.Bytes(), uint32(1024))
	f.Add(valid.Bytes()[:HeaderSize+2], uint32(1024))     // truncated payload
	f.Add(valid.Bytes()[:7], uint32(1024))                // truncated header
	f.Add(header(KindHello, 1, 2, 0xffffffff), uint32(1)) // huge length
	f.Add(header(KindHello, 1, 2, 0xffffffff), uint32(fuzzMaxLimit))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), uint32(1024)) // bad magic
	f.Add([]byte{}, uint32(0))                            // empty

	f.Fuzz(func(t *testing.T, data []byte, limit uint32) {
		maxPayload := int(limit % (fuzzMaxLimit + 1))
		r := bytes.NewReader(data)
		fr, err := DecodeFrame(r, maxPayload)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("error wraps neither ErrProtocol nor ErrFrameTooLarge: %v", err)
			}
			return
		}
		if len(fr.Payload) > maxPayload {
			t.Fatalf("payload of %d bytes exceeds limit %d", len(fr.Payload), maxPayload)
		}
		consumed := len(data) - r.Len()
		var out bytes.Buffer
		if err := EncodeFrame(&out, fr); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(out.Bytes(), data[:consumed]) {
			t.Fatalf("re-encoding differs from the %d consumed bytes:\n got %x\nwant %x", consumed, out.Bytes(), data[:consumed])
		}
	})
}

func FuzzDecodeBlobs(f *testing.F) {
	f.Add(EncodeBlobs([][]byte{[]byte("rank0"), {}, []byte("rank2")}), uint16(3))
	f.Add(EncodeBlobs([][]byte{[]byte("rank0"), []byte("rank1")})[:9], uint16(2)) // truncated
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2}, uint16(1))                        // huge length
	f.Add([]byte{}, uint16(0))                                                    // empty
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, uint16(1))                              // trailing bytes

	f.Fuzz(func(t *testing.T, data []byte, want uint16) {
		blobs, err := DecodeBlobs(data, int(want))
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error does not wrap ErrProtocol: %v", err)
			}
			return
		}
		if len(blobs) != int(want) {
			t.Fatalf("got %d blobs, want %d", len(blobs), want)
		}
		if got := EncodeBlobs(blobs); !bytes.Equal(got, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, data)
		}
	})
}
