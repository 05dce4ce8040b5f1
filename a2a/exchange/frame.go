package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Wire format constants; doc.go describes the layout.
const (
	// magic opens every frame.
	magic = "ULYX"
	// protocolVersion is the only protocol version this package speaks.
	// Version 2 put a code in front of the message of error frames.
	protocolVersion uint16 = 2
	// headerSize is the size in bytes of a frame header: magic (4), version
	// (2), kind (2), rank (4), world (4), payload length (4), big-endian.
	headerSize = 20
)

// Frame kinds.
const (
	// kindHello is sent by rank r>0 to rank 0; its payload is the rank's blob.
	kindHello uint16 = 1
	// kindResult is sent by rank 0 to every peer once all hellos are in; its
	// payload is encodeBlobs of the P blobs, in rank order.
	kindResult uint16 = 2
	// kindError is sent by rank 0 to the peers of a failed round; its
	// payload is encodeError's code and message.
	kindError uint16 = 3
)

// frame is one protocol message.
type frame struct {
	kind    uint16 // kindHello, kindResult or kindError
	rank    uint32 // the sender's rank (0 for frames sent by rank 0)
	world   uint32 // the sender's world size
	payload []byte // kind-specific body; at most math.MaxUint32 bytes
}

// encodeFrame writes f to w as a single Write call: the 20-byte header
// followed by the payload. It fails with ErrFrameTooLarge if the payload
// length does not fit the 32-bit length field.
func encodeFrame(w io.Writer, f frame) error {
	if uint64(len(f.payload)) > math.MaxUint32 {
		return fmt.Errorf("payload of %d bytes does not fit a frame (limit %d): %w",
			len(f.payload), uint64(math.MaxUint32), ErrFrameTooLarge)
	}
	buf := make([]byte, headerSize+len(f.payload))
	copy(buf, magic)
	binary.BigEndian.PutUint16(buf[4:], protocolVersion)
	binary.BigEndian.PutUint16(buf[6:], f.kind)
	binary.BigEndian.PutUint32(buf[8:], f.rank)
	binary.BigEndian.PutUint32(buf[12:], f.world)
	binary.BigEndian.PutUint32(buf[16:], uint32(len(f.payload)))
	copy(buf[headerSize:], f.payload)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write frame (kind %d, %d bytes): %w", f.kind, len(buf), err)
	}
	return nil
}

// readChunk is the largest buffer decodeFrame allocates before it has seen
// the corresponding payload bytes arrive; larger payloads grow geometrically
// as data is actually read, so a lying length field costs at most this much.
const readChunk = 64 << 10

// decodeFrame reads one frame from r. Payloads longer than maxPayload
// (negative means 0) are rejected with ErrFrameTooLarge before anything is
// allocated for them; malformed input (bad magic or version, unknown kind,
// truncation) yields ErrProtocol. Errors from r other than EOF are returned
// wrapped (so timeouts stay detectable with errors.Is). decodeFrame never
// allocates more than maxPayload bytes for the payload, never allocates
// ahead of data actually received by more than 64 KiB, and never panics.
// The returned payload is a fresh, non-nil slice owned by the caller.
func decodeFrame(r io.Reader, maxPayload int) (frame, error) {
	var hdr [headerSize]byte
	// Read the magic first so garbage is rejected without waiting for a
	// whole header.
	if err := readHeaderPart(r, hdr[:4], 0); err != nil {
		return frame{}, err
	}
	if string(hdr[:4]) != magic {
		return frame{}, fmt.Errorf("bad magic %q, want %q: %w", hdr[:4], magic, ErrProtocol)
	}
	if err := readHeaderPart(r, hdr[4:], 4); err != nil {
		return frame{}, err
	}
	if v := binary.BigEndian.Uint16(hdr[4:]); v != protocolVersion {
		return frame{}, fmt.Errorf("unsupported version %d, want %d: %w", v, protocolVersion, ErrProtocol)
	}
	f := frame{
		kind:  binary.BigEndian.Uint16(hdr[6:]),
		rank:  binary.BigEndian.Uint32(hdr[8:]),
		world: binary.BigEndian.Uint32(hdr[12:]),
	}
	if f.kind < kindHello || f.kind > kindError {
		return frame{}, fmt.Errorf("unknown frame kind %d (rank %d): %w", f.kind, f.rank, ErrProtocol)
	}
	n := binary.BigEndian.Uint32(hdr[16:])
	maxPayload = max(maxPayload, 0)
	if uint64(n) > uint64(maxPayload) {
		return frame{}, fmt.Errorf("frame kind %d from rank %d announces %d payload bytes, limit is %d: %w",
			f.kind, f.rank, n, maxPayload, ErrFrameTooLarge)
	}
	p, err := readPayload(r, int(n))
	if err != nil {
		return frame{}, fmt.Errorf("frame kind %d from rank %d: %w", f.kind, f.rank, err)
	}
	f.payload = p
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
		return fmt.Errorf("connection closed before a frame header: %w: %w", io.EOF, ErrProtocol)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("truncated frame header: got %d of %d bytes: %w: %w",
			got, headerSize, io.ErrUnexpectedEOF, ErrProtocol)
	default:
		return fmt.Errorf("read frame header (%d of %d bytes): %w", got, headerSize, err)
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
				return nil, fmt.Errorf("truncated payload: got %d of %d bytes: %w: %w",
					len(buf), n, io.ErrUnexpectedEOF, ErrProtocol)
			}
			return nil, fmt.Errorf("read payload (%d of %d bytes): %w", len(buf), n, err)
		}
	}
	return buf, nil
}

// encodeBlobs concatenates blobs as a sequence of (uint32 big-endian length,
// bytes) records, in order. It panics if a blob is 4 GiB or larger, which
// no frame could carry anyway.
func encodeBlobs(blobs [][]byte) []byte {
	total := 0
	for i, b := range blobs {
		if uint64(len(b)) > math.MaxUint32 {
			panic(fmt.Sprintf("exchange: encodeBlobs: blob %d is %d bytes, over the 32-bit limit", i, len(b)))
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

// decodeBlobs parses exactly want length-prefixed blobs from p, which must
// be consumed completely; anything else is ErrProtocol. The blobs are
// non-nil copies (they do not alias p) and together allocate no more than
// len(p) bytes.
func decodeBlobs(p []byte, want int) ([][]byte, error) {
	if want < 0 {
		return nil, fmt.Errorf("asked for %d blobs: %w", want, ErrProtocol)
	}
	if want > len(p)/4 {
		return nil, fmt.Errorf("blob list of %d bytes cannot hold %d blobs (4-byte length each): %w",
			len(p), want, ErrProtocol)
	}
	data := make([]byte, len(p))
	copy(data, p)
	out := make([][]byte, want)
	off := 0
	for i := range want {
		if len(data)-off < 4 {
			return nil, fmt.Errorf("blob list truncated at blob %d of %d: %d bytes left, need a 4-byte length: %w",
				i, want, len(data)-off, ErrProtocol)
		}
		n := binary.BigEndian.Uint32(data[off:])
		off += 4
		if uint64(n) > uint64(len(data)-off) {
			return nil, fmt.Errorf("blob %d of %d claims %d bytes, only %d left: %w",
				i, want, n, len(data)-off, ErrProtocol)
		}
		end := off + int(n)
		out[i] = data[off:end:end]
		off = end
	}
	if off != len(data) {
		return nil, fmt.Errorf("%d trailing bytes after %d blobs: %w", len(data)-off, want, ErrProtocol)
	}
	return out, nil
}
