package fdshare

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// MaxConns is the most connections of this user a Server serves at once;
// more are closed unanswered (an honest peer makes one per fetch).
const MaxConns = 16

// Export returns a new descriptor of the buffer, which the Server closes
// once sent, and the size of the allocation it stands for.
type Export func() (fd int, size uint64, err error)

// Sizes of the protocol's messages.
const (
	nonceSize     = 32
	macSize       = sha256.Size
	helloSize     = 4 + 4 + nonceSize // magic, version, nonce
	challengeSize = nonceSize + macSize
	authSize      = macSize
	giveSize      = 8 + macSize // size, MAC
)

const (
	helloMagic = "ULYF"
	version    = 1
)

// MAC labels: each MAC stands for one thing only.
const (
	labelName  = "fdshare name"
	labelProof = "fdshare proof"
	labelAuth  = "fdshare auth"
	labelGive  = "fdshare give"
)

// session is one connection's MAC key and nonces.
type session struct {
	key          []byte
	peer, server [nonceSize]byte
}

// mac is HMAC-SHA256 under the key of label || 0x00 || peer nonce ||
// server nonce || data.
func (s *session) mac(label string, data []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(label))
	h.Write([]byte{0})
	h.Write(s.peer[:])
	h.Write(s.server[:])
	h.Write(data)
	return h.Sum(nil)
}

// verify reports in constant time whether got is s.mac(label, data).
func (s *session) verify(label string, data, got []byte) bool {
	return hmac.Equal(s.mac(label, data), got)
}

// socketName is the abstract socket's name for key: "@ulysses-fd-" and
// 32 hex digits of HMAC(key, labelName), which tell nothing of the key.
func socketName(key []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(labelName))
	return "@ulysses-fd-" + hex.EncodeToString(h.Sum(nil)[:16])
}

func newNonce() [nonceSize]byte {
	var n [nonceSize]byte
	_, _ = rand.Read(n[:])
	return n
}

func hello(nonce [nonceSize]byte) []byte {
	b := make([]byte, 0, helloSize)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint32(b, version)
	return append(b, nonce[:]...)
}

// sizeBytes is size as the give message carries it.
func sizeBytes(size uint64) []byte { return binary.BigEndian.AppendUint64(nil, size) }
