package exchange

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
)

// Sizes of the authentication fields; doc.go describes them.
const (
	// nonceSize is the size of a nonce: a peer's in its hello, rank 0's in
	// its challenge.
	nonceSize = 32
	// macSize is the size of a MAC (HMAC-SHA256).
	macSize = sha256.Size
)

// MAC labels. Every MAC of the protocol has its own, so that none can
// stand for another (a proof for an acknowledgement, say).
const (
	labelProof  = "proof"  // rank 0's proof of the secret, in the challenge
	labelAuth   = "auth"   // the peer's proof of the secret
	labelBlob   = "blob"   // over the peer's blob
	labelResult = "result" // over the result's blob list
	labelAck    = "ack"    // the peer's acknowledgement
	labelCommit = "commit" // rank 0's commit
)

// session is what the MACs of one connection in one round are bound to:
// the group's secret, the rank and world size the
// peer's hello claims, and both nonces.
type session struct {
	key         []byte
	rank, world uint32
	nonce       [nonceSize]byte // the peer's, from its hello
	challenge   [nonceSize]byte // rank 0's, from its challenge
}

// frame is a frame of kind from this session's rank.
func (s *session) frame(kind uint16, payload []byte) frame {
	return frame{kind: kind, rank: s.rank, world: s.world, payload: payload}
}

// mac returns HMAC-SHA256 under s.key of
//
//	label || 0x00 || version (uint16) || rank (uint32) || world (uint32) || nonce || challenge || data
//
// (integers big-endian). Everything before data has a fixed length once
// the label is read, so no two inputs are confused.
func (s *session) mac(label string, data []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	var fixed [11]byte
	binary.BigEndian.PutUint16(fixed[1:], protocolVersion)
	binary.BigEndian.PutUint32(fixed[3:], s.rank)
	binary.BigEndian.PutUint32(fixed[7:], s.world)
	h.Write([]byte(label))
	h.Write(fixed[:])
	h.Write(s.nonce[:])
	h.Write(s.challenge[:])
	h.Write(data)
	return h.Sum(nil)
}

// verify reports, in constant time, whether got is s.mac(label, data).
func (s *session) verify(label string, data, got []byte) bool {
	return hmac.Equal(s.mac(label, data), got)
}

// newNonce returns fresh random bytes from crypto/rand (which does not
// fail on the systems Go supports: it crashes the program instead).
func newNonce() [nonceSize]byte {
	var n [nonceSize]byte
	_, _ = rand.Read(n[:])
	return n
}

// splitMAC splits p into its body and the MAC at its end, and reports
// false if p is too short to hold a MAC.
func splitMAC(p []byte) (body, mac []byte, ok bool) {
	if len(p) < macSize {
		return nil, nil, false
	}
	return p[:len(p)-macSize], p[len(p)-macSize:], true
}
