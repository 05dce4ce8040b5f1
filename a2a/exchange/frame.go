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
	// Version 2 put a code in front of the message of error frames;
	// version 3 added the secret's proofs and the commit step (frame kinds
	// 4 to 8, error code 5).
	protocolVersion uint16 = 3
	// headerSize is the size in bytes of a frame header: magic (4), version
	// (2), kind (2), rank (4), world (4), payload length (4), big-endian.
	headerSize = 20
)

// Frame kinds; doc.go describes the exchange they make up.
const (
	// kindHello is a peer's first frame: its nonce (nonceSize bytes).
	kindHello uint16 = 1
	// kindResult is sent by rank 0 to every peer once every blob is in:
	// encodeBlobs of the P blobs, in rank order, then a MAC.
	kindResult uint16 = 2
	// kindError is sent by rank 0 to the peers of a failed round, and by a
	// peer that refuses the result instead of its acknowledgement; its
	// payload is encodeError's code and message.
	kindError uint16 = 3
	// kindChallenge answers a hello: rank 0's nonce and its proof of the
	// secret (nonceSize+macSize bytes).
	kindChallenge uint16 = 4
	// kindAuth is the peer's proof of the secret (macSize bytes).
	kindAuth uint16 = 5
	// kindBlob is the peer's blob, then a MAC.
	kindBlob uint16 = 6
	// kindAck is a peer's acknowledgement of the result (a MAC).
	kindAck uint16 = 7
	// kindCommit is rank 0's word that every peer acknowledged (a MAC).
	kindCommit uint16 = 8
	// lastKind is the highest kind this version knows.
	lastKind = kindCommit
)

// frame is one protocol message.
type frame struct {
	kind    uint16 // one of the kinds above
	rank    uint32 // the sender's rank (0 for frames sent by rank 0)
	world   uint32 // the sender's world size
	payload []byte // kind-specific body; at most math.MaxUint32 bytes
}

// encodeFrame writes f to w as a single Write call: the 20-byte header
// followed by the payload and then tail (part of the payload, e.g. a MAC).
// It fails with ErrFrameTooLarge if the payload length does not fit the
// 32-bit length field.
func encodeFrame(w io.Writer, f frame, tail ...byte) error {
	buf, err := appendFrame(nil, f, tail...)
	if err != nil {
		return err
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write frame (kind %d, %d bytes): %w", f.kind, len(buf), err)
	}
	return nil
}

// appendFrame appends f, with tail after its payload, to buf.
func appendFrame(buf []byte, f frame, tail ...byte) ([]byte, error) {
	n := uint64(len(f.payload)) + uint64(len(tail))
	if n > math.MaxUint32 {
		return buf, fmt.Errorf("payload of %d bytes does not fit a frame (limit %d): %w",
			n, uint64(math.MaxUint32), ErrFrameTooLarge)
	}
	buf = append(buf, magic...)
	buf = binary.BigEndian.AppendUint16(buf, protocolVersion)
	buf = binary.BigEndian.AppendUint16(buf, f.kind)
	buf = binary.BigEndian.AppendUint32(buf, f.rank)
	buf = binary.BigEndian.AppendUint32(buf, f.world)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	buf = append(buf, f.payload...)
	return append(buf, tail...), nil
}

// readChunk is the most decodeFrame allocates ahead of the payload bytes
// it has received: payloads up to this size get one buffer of their size,
// longer ones are read in chunks of this size, each allocated when the
// previous one is full.
const readChunk = 64 << 10

// versionError is a frame header of another protocol version. It matches
// ErrProtocol.
type versionError struct{ got uint16 }

func (e *versionError) Error() string {
	return fmt.Sprintf("unsupported version %d, want %d: %v", e.got, protocolVersion, ErrProtocol)
}

func (e *versionError) Unwrap() error { return ErrProtocol }

// decodeFrame reads one frame from r. Payloads longer than maxPayload
// (negative means 0) are rejected with ErrFrameTooLarge before anything is
// allocated for them; malformed input (bad magic or version, unknown kind,
// truncation) yields ErrProtocol. Errors from r other than EOF are returned
// wrapped (so timeouts stay detectable with errors.Is). decodeFrame never
// panics, never allocates more than maxPayload bytes for the payload
// before all of it has arrived, and while it waits for payload bytes holds
// at most readChunk (64 KiB) beyond those received; once a payload longer
// than readChunk is complete, it is copied into one slice, so for a moment
// the payload takes twice its size. The returned payload is a fresh,
// non-nil slice owned by the caller.
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
		return frame{}, &versionError{got: v}
	}
	f := frame{
		kind:  binary.BigEndian.Uint16(hdr[6:]),
		rank:  binary.BigEndian.Uint32(hdr[8:]),
		world: binary.BigEndian.Uint32(hdr[12:]),
	}
	if f.kind < kindHello || f.kind > lastKind {
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

// readPayload reads exactly n bytes from r. Up to readChunk bytes are
// read into one buffer of n bytes; more are read in readChunk-sized
// chunks, each allocated once the previous one is full, and joined once
// all have arrived.
func readPayload(r io.Reader, n int) ([]byte, error) {
	if n <= readChunk {
		buf := make([]byte, n)
		m, err := io.ReadFull(r, buf)
		if err != nil {
			return nil, payloadError(m, n, err)
		}
		return buf, nil
	}
	var chunks [][]byte // grows with the chunks received, not with n
	got := 0
	for got < n {
		c := make([]byte, min(readChunk, n-got))
		m, err := io.ReadFull(r, c)
		got += m
		if err != nil {
			return nil, payloadError(got, n, err)
		}
		chunks = append(chunks, c)
	}
	buf := make([]byte, 0, n)
	for i, c := range chunks {
		buf = append(buf, c...)
		chunks[i] = nil
	}
	return buf, nil
}

// payloadError words a failure to read a payload after got of its n bytes.
func payloadError(got, n int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated payload: got %d of %d bytes: %w: %w",
			got, n, io.ErrUnexpectedEOF, ErrProtocol)
	}
	return fmt.Errorf("read payload (%d of %d bytes): %w", got, n, err)
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
