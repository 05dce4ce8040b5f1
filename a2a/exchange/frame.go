package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Wire format constants.
const (
	// Magic opens every frame.
	Magic = "ULYX"
	// Version is the only protocol version this package speaks.
	Version uint16 = 1
	// HeaderSize is the size in bytes of a frame header: magic (4), version
	// (2), kind (2), rank (4), world (4), payload length (4), big-endian.
	HeaderSize = 20
)

// Frame kinds.
const (
	// KindHello is sent by rank r>0 to rank 0; its payload is the rank's blob.
	KindHello uint16 = 1
	// KindResult is sent by rank 0 to every peer once all hellos are in; its
	// payload is EncodeBlobs of the P blobs, in rank order.
	KindResult uint16 = 2
	// KindError is sent by rank 0 to the peers of a failed round; its payload
	// is a UTF-8 message saying why.
	KindError uint16 = 3
)

// Sentinel errors. Every error returned by this package wraps the matching
// one, so callers can test with errors.Is.
var (
	// ErrProtocol reports a malformed frame or blob list: bad magic or
	// version, unknown kind, truncated data, inconsistent lengths, or a
	// result that does not match what was sent.
	ErrProtocol = errors.New("exchange: protocol error")
	// ErrFrameTooLarge reports a frame or blob larger than the configured
	// limit. It is distinct from ErrProtocol.
	ErrFrameTooLarge = errors.New("exchange: frame too large")
	// ErrWorldSize reports a peer (or a configuration) with a different or
	// invalid world size.
	ErrWorldSize = errors.New("exchange: world size mismatch")
	// ErrRank reports a duplicate or out-of-range rank.
	ErrRank = errors.New("exchange: bad rank")
	// ErrClosed reports use of an exchanger after Close.
	ErrClosed = errors.New("exchange: closed")
)

// Frame is one protocol message. See the package documentation for the
// wire layout.
type Frame struct {
	// Kind is KindHello, KindResult or KindError.
	Kind uint16
	// Rank is the sender's rank (0 for frames sent by rank 0).
	Rank uint32
	// World is the sender's world size.
	World uint32
	// Payload is the kind-specific body; at most math.MaxUint32 bytes.
	Payload []byte
}

// EncodeFrame writes f to w as a single Write call: the 20-byte header
// followed by the payload. It fails with ErrFrameTooLarge if the payload
// length does not fit the 32-bit length field.
func EncodeFrame(w io.Writer, f Frame) error {
	if uint64(len(f.Payload)) > math.MaxUint32 {
		return fmt.Errorf("%w: payload of %d bytes does not fit a frame (limit %d)",
			ErrFrameTooLarge, len(f.Payload), uint64(math.MaxUint32))
	}
	buf := make([]byte, HeaderSize+len(f.Payload))
	copy(buf, Magic)
	binary.BigEndian.PutUint16(buf[4:], Version)
	binary.BigEndian.PutUint16(buf[6:], f.Kind)
	binary.BigEndian.PutUint32(buf[8:], f.Rank)
	binary.BigEndian.PutUint32(buf[12:], f.World)
	binary.BigEndian.PutUint32(buf[16:], uint32(len(f.Payload)))
	copy(buf[HeaderSize:], f.Payload)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("exchange: write frame (kind %d, %d bytes): %w", f.Kind, len(buf), err)
	}
	return nil
}

// readChunk is the largest buffer DecodeFrame allocates before it has seen
// the corresponding payload bytes arrive; larger payloads grow geometrically
// as data is actually read, so a lying length field costs at most this much.
const readChunk = 64 << 10

// DecodeFrame reads one frame from r. Payloads longer than maxPayload
// (negative means 0) are rejected with ErrFrameTooLarge before anything is
// allocated for them; malformed input (bad magic or version, unknown kind,
// truncation) yields ErrProtocol. Errors from r other than EOF are returned
// wrapped (so timeouts stay detectable with errors.Is). DecodeFrame never
// allocates more than maxPayload bytes for the payload, never allocates
// ahead of data actually received by more than 64 KiB, and never panics.
// The returned payload is a fresh, non-nil slice owned by the caller.
func DecodeFrame(r io.Reader, maxPayload int) (Frame, error) {
	var hdr [HeaderSize]byte
	// Read the magic first so garbage is rejected without waiting for a
	// whole header.
	if err := readHeaderPart(r, hdr[:4], 0); err != nil {
		return Frame{}, err
	}
	if string(hdr[:4]) != Magic {
		return Frame{}, fmt.Errorf("%w: bad magic %q, want %q", ErrProtocol, hdr[:4], Magic)
	}
	if err := readHeaderPart(r, hdr[4:], 4); err != nil {
		return Frame{}, err
	}
	if v := binary.BigEndian.Uint16(hdr[4:]); v != Version {
		return Frame{}, fmt.Errorf("%w: unsupported version %d, want %d", ErrProtocol, v, Version)
	}
	f := Frame{
		Kind:  binary.BigEndian.Uint16(hdr[6:]),
		Rank:  binary.BigEndian.Uint32(hdr[8:]),
		World: binary.BigEndian.Uint32(hdr[12:]),
	}
	if f.Kind < KindHello || f.Kind > KindError {
		return Frame{}, fmt.Errorf("%w: unknown frame kind %d (rank %d)", ErrProtocol, f.Kind, f.Rank)
	}
	n := binary.BigEndian.Uint32(hdr[16:])
	if maxPayload < 0 {
		maxPayload = 0
	}
	if uint64(n) > uint64(maxPayload) {
		return Frame{}, fmt.Errorf("%w: frame kind %d from rank %d announces %d payload bytes, limit is %d",
			ErrFrameTooLarge, f.Kind, f.Rank, n, maxPayload)
	}
	p, err := readPayload(r, int(n))
	if err != nil {
		return Frame{}, fmt.Errorf("%w (frame kind %d from rank %d)", err, f.Kind, f.Rank)
	}
	f.Payload = p
	return f, nil
}

// readHeaderPart fills b from r; off is the offset of b within the header,
// used for error messages.
func readHeaderPart(r io.Reader, b []byte, off int) error {
	n, err := io.ReadFull(r, b)
	if err == nil {
		return nil
	}
	got := off + n
	switch {
	case errors.Is(err, io.EOF) && got == 0:
		return fmt.Errorf("%w: connection closed before a frame header: %w", ErrProtocol, io.EOF)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: truncated frame header: got %d of %d bytes: %w",
			ErrProtocol, got, HeaderSize, io.ErrUnexpectedEOF)
	default:
		return fmt.Errorf("exchange: read frame header (%d of %d bytes): %w", got, HeaderSize, err)
	}
}

// readPayload reads exactly n bytes from r, growing its buffer only as data
// arrives.
func readPayload(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, readChunk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: truncated payload: got %d of %d bytes: %w",
					ErrProtocol, len(buf), n, io.ErrUnexpectedEOF)
			}
			return nil, fmt.Errorf("exchange: read payload (%d of %d bytes): %w", len(buf), n, err)
		}
	}
	return buf, nil
}

// EncodeBlobs concatenates blobs as a sequence of (uint32 big-endian length,
// bytes) records, in order. It panics if a blob is 4 GiB or larger, which
// no frame could carry anyway.
func EncodeBlobs(blobs [][]byte) []byte {
	total := 0
	for i, b := range blobs {
		if uint64(len(b)) > math.MaxUint32 {
			panic(fmt.Sprintf("exchange: EncodeBlobs: blob %d is %d bytes, over the 32-bit limit", i, len(b)))
		}
		total += 4 + len(b)
	}
	out := make([]byte, 0, total)
	for _, b := range blobs {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

// DecodeBlobs parses exactly want length-prefixed blobs from p, which must
// be consumed completely; anything else is ErrProtocol. The blobs are
// non-nil copies (they do not alias p) and together allocate no more than
// len(p) bytes.
func DecodeBlobs(p []byte, want int) ([][]byte, error) {
	if want < 0 {
		return nil, fmt.Errorf("%w: asked for %d blobs", ErrProtocol, want)
	}
	if want > len(p)/4 {
		return nil, fmt.Errorf("%w: blob list of %d bytes cannot hold %d blobs (4-byte length each)",
			ErrProtocol, len(p), want)
	}
	data := make([]byte, len(p))
	copy(data, p)
	out := make([][]byte, want)
	off := 0
	for i := range want {
		if len(data)-off < 4 {
			return nil, fmt.Errorf("%w: blob list truncated at blob %d of %d: %d bytes left, need a 4-byte length",
				ErrProtocol, i, want, len(data)-off)
		}
		n := binary.BigEndian.Uint32(data[off:])
		off += 4
		if uint64(n) > uint64(len(data)-off) {
			return nil, fmt.Errorf("%w: blob %d of %d claims %d bytes, only %d left",
				ErrProtocol, i, want, n, len(data)-off)
		}
		end := off + int(n)
		out[i] = data[off:end:end]
		off = end
	}
	if off != len(data) {
		return nil, fmt.Errorf("%w: %d trailing bytes after %d blobs", ErrProtocol, len(data)-off, want)
	}
	return out, nil
}
