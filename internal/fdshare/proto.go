package fdshare

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"path/filepath"
	"time"
)

// MaxConns is the most connections a Server holds open at once; past it
// a newcomer takes the place of one that has not proved the key and has
// had its grace, or waits for one (an honest peer makes one per fetch).
const MaxConns = 64

// The graces of a connection that has not proved the key (see
// internal/admit): an honest peer sends its hello with its first bytes
// and its proof one round trip and two HMACs after the challenge, both
// well inside these on a loaded host; a connection evicted all the same
// is dialled again by Fetch.
const (
	helloGrace = 10 * time.Millisecond
	proofGrace = 50 * time.Millisecond
)

// AfterGive runs once a descriptor is sent: a variable so that a test can
// kill the process with the descriptor in flight.
var AfterGive = func() {}

// Export returns a new descriptor of the buffer, which the Server closes
// once sent, and the size of the allocation it stands for.
type Export func() (fd int, size uint64, err error)

// Claim is what an owner binds the descriptor it gives to, and what a
// peer expects of the buffer behind a handle: the owner's process (its
// nonce, handle.ProcessNonce), its rank and world size, and the bytes it
// asked for before the driver rounded them up. A peer refuses any other,
// so that a handle pointing at another Comm's buffer (of another process,
// rank, group size or buffer size) does not get it mapped.
type Claim struct {
	Nonce uint64
	World uint32
	Rank  uint32
	Bytes uint64
}

// Sizes of the protocol's messages.
const (
	nonceSize     = 32
	macSize       = sha256.Size
	claimSize     = 8 + 4 + 4 + 8
	helloSize     = 4 + 4 + nonceSize // magic, version, nonce
	challengeSize = nonceSize + macSize
	authSize      = macSize
	giveSize      = 8 + claimSize + macSize // size, claim, MAC
)

const (
	helloMagic = "ULYF"
	version    = 2 // 2: the claim in the give
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

// socketName is the socket's name in its directory for key: "fd-" and 32
// hex digits of HMAC(key, labelName), which tell nothing of the key.
func socketName(key []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(labelName))
	return "fd-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// SocketPath is where the socket of the buffer keyed key is in dir, a
// Server's Dir.
func SocketPath(dir string, key []byte) string { return filepath.Join(dir, socketName(key)) }

// Hello is a hello as a peer sends it first, with a fresh nonce: for
// tests that play a peer that goes no further.
func Hello() []byte { return hello(newNonce()) }

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

// giveBody is what the give message says before its MAC: the mapped
// size (0: the owner could not export) and the claim.
func giveBody(size uint64, c Claim) []byte {
	b := make([]byte, 0, 8+claimSize)
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint64(b, c.Nonce)
	b = binary.BigEndian.AppendUint32(b, c.World)
	b = binary.BigEndian.AppendUint32(b, c.Rank)
	return binary.BigEndian.AppendUint64(b, c.Bytes)
}

// parseGiveBody reads what giveBody wrote.
func parseGiveBody(b []byte) (size uint64, c Claim) {
	be := binary.BigEndian
	return be.Uint64(b), Claim{Nonce: be.Uint64(b[8:]), World: be.Uint32(b[16:]), Rank: be.Uint32(b[20:]), Bytes: be.Uint64(b[24:])}
}
