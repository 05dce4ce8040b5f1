package exchange

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"
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
	var chal bytes.Buffer
	if err := encodeFrame(&chal, frame{kind: kindChallenge, world: 2, payload: make([]byte, nonceSize)}, make([]byte, macSize)...); err != nil {
		f.Fatal(err)
	}
	f.Add(chal.Bytes(), uint32(1024))
	f.Add(append(headerVersion(2, kindHello, 1, 2, 6), "handle"...), uint32(1024)) // version 2
	f.Add(header(kindCommit+1, 0, 2, 0), uint32(1024))                             // unknown kind

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

// Client modes of FuzzRootRound (the low two bits of mode).
const (
	fuzzRaw      = 0 // write the data as soon as connected
	fuzzHello    = 1 // send a hello, read the challenge, write the data
	fuzzSecret   = 2 // fuzzHello, prove the secret, write the data
	fuzzNoSecret = 3 // fuzzHello, send a proof without the secret, write the data
)

// fuzzMaxData caps the bytes FuzzRootRound's client writes.
const fuzzMaxData = 4096

// fuzzMode packs a client mode with the rank and world size its hello
// claims.
func fuzzMode(how, rank, world uint8) uint8 { return how | rank<<2 | world<<4 }

// fuzzGroup makes the group of two that every input of FuzzRootRound runs
// a round of (rank 0 and an honest rank 1, sharing testSecret), closed
// when f ends. One group, and so one listening port, for all: an
// exchanger per input, at some thousand inputs a second, left a port in
// TIME_WAIT for each and ran out of local ports within a minute.
func fuzzGroup(f *testing.F) (x0, x1 *TCP) {
	cfg := TCPConfig{Addr: "127.0.0.1:0", WorldSize: 2, Secret: testSecret, MaxPayload: 1024, DialInterval: time.Millisecond}
	x0, err := NewTCP(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = x0.Close() })
	if err := x0.Listen(); err != nil {
		f.Fatal(err)
	}
	cfg.Addr, cfg.Rank = x0.Addr(), 1
	if x1, err = NewTCP(cfg); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = x1.Close() })
	return x0, x1
}

// FuzzRootRound feeds the fuzzer's bytes, as a client over loopback, into
// a live round of a group of two (fuzzGroup's, one round per input). The low two bits of mode say how the client speaks (see
// fuzzRaw and the others); bits 2-3 and 4-5 are the rank and world size
// its hello claims. A client without the secret must change nothing: both
// honest ranks get the result. One with the secret (a buggy rank of the
// group) may fail the round, with ErrRank or ErrWorldSize, but never on
// one rank only.
func FuzzRootRound(f *testing.F) {
	hello := func(rank, world uint32) []byte {
		var b bytes.Buffer
		_ = encodeFrame(&b, frame{kind: kindHello, rank: rank, world: world, payload: make([]byte, nonceSize)})
		return b.Bytes()
	}
	fr := func(kind uint16, payload []byte) []byte {
		var b bytes.Buffer
		_ = encodeFrame(&b, frame{kind: kind, rank: 1, world: 2, payload: payload})
		return b.Bytes()
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	f.Add(cat(hello(1, 2), fr(kindAuth, make([]byte, macSize)), fr(kindBlob, make([]byte, 40))), fuzzMode(fuzzRaw, 0, 0))
	f.Add(cat(hello(1, 2), hello(1, 2)), fuzzMode(fuzzRaw, 0, 0))
	f.Add(append(headerVersion(2, kindHello, 1, 2, 6), "handle"...), fuzzMode(fuzzRaw, 0, 0))
	f.Add(header(kindHello, 1, 2, 1<<20), fuzzMode(fuzzRaw, 0, 0))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), fuzzMode(fuzzRaw, 0, 0))
	f.Add(cat(fr(kindAuth, make([]byte, macSize)), fr(kindBlob, make([]byte, 40))), fuzzMode(fuzzHello, 1, 2))
	f.Add(fr(kindAck, make([]byte, macSize)), fuzzMode(fuzzHello, 1, 2))
	f.Add(fr(kindBlob, make([]byte, 40)), fuzzMode(fuzzNoSecret, 1, 2))
	f.Add(fr(kindBlob, make([]byte, 40)), fuzzMode(fuzzSecret, 1, 2))
	f.Add([]byte{}, fuzzMode(fuzzSecret, 1, 2))
	f.Add(fr(kindBlob, make([]byte, 40)), fuzzMode(fuzzSecret, 3, 2))
	f.Add(fr(kindBlob, make([]byte, 40)), fuzzMode(fuzzSecret, 1, 3))
	f.Add(header(kindBlob, 1, 2, 1<<20), fuzzMode(fuzzSecret, 1, 2))

	x0, x1 := fuzzGroup(f)
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		if len(data) > fuzzMaxData {
			data = data[:fuzzMaxData]
		}
		how, rank, world := mode&3, uint32(mode>>2&3), uint32(mode>>4&3)
		ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel0()
		ctx1, cancel1 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel1()
		var res0, res1 [][]byte
		var err0, err1 error
		done0 := make(chan struct{})
		go func() {
			defer close(done0)
			res0, err0 = x0.AllGather(ctx0, []byte("zero"))
		}()

		c, err := net.Dial("tcp", x0.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		played := make(chan struct{})
		go func() {
			defer close(played)
			if how != fuzzRaw {
				key := testSecret
				if how != fuzzSecret {
					key = nil
				}
				cl := &client{c: c.(*net.TCPConn), s: &session{key: key, rank: rank, world: world, nonce: newNonce()}}
				if cl.send(kindHello, cl.s.nonce[:], "") != nil {
					return
				}
				if _, err := cl.challenge(); err != nil {
					return
				}
				if how != fuzzHello && cl.send(kindAuth, nil, labelAuth) != nil {
					return
				}
			}
			_, _ = c.Write(data)
		}()
		select {
		case <-played:
		case <-time.After(50 * time.Millisecond): // rank 0 may not read it all
		}

		go func() {
			<-done0
			if err0 != nil {
				cancel1() // rank 1 must fail too; no need to wait for that
			}
		}()
		res1, err1 = x1.AllGather(ctx1, []byte("one"))
		<-done0
		_ = c.Close()
		<-played

		t.Logf("mode %d/%d/%d: rank 0: %v; rank 1: %v", how, rank, world, err0, err1)
		want := [][]byte{[]byte("zero"), []byte("one")}
		if (err0 == nil) != (err1 == nil) {
			t.Fatalf("ranks disagree: rank 0: %v; rank 1: %v", err0, err1)
		}
		if how != fuzzSecret && err0 != nil {
			t.Fatalf("a client without the secret failed the round: rank 0: %v; rank 1: %v", err0, err1)
		}
		if err0 != nil {
			if !errors.Is(err0, ErrRank) && !errors.Is(err0, ErrWorldSize) {
				t.Fatalf("rank 0 failed with %v, want ErrRank or ErrWorldSize", err0)
			}
			return
		}
		for r, res := range [][][]byte{res0, res1} {
			if len(res) != 2 || !bytes.Equal(res[0], want[0]) || !bytes.Equal(res[1], want[1]) {
				t.Fatalf("rank %d got %q, want %q", r, res, want)
			}
		}
	})
}
