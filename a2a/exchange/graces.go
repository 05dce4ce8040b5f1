package exchange

import "time"

// A connection's graces, from TCPConfig.AuthTimeout (which bounds the
// hello and the proof together).
const (
	// maxHelloGrace bounds the wait for a hello. An honest peer sends its
	// hello with its first bytes, so rank 0 normally finds it in the
	// socket as it starts to read; one that has not come within this is
	// most likely a stranger's.
	maxHelloGrace = 10 * time.Millisecond
	// proofGraceShare is the share of AuthTimeout a challenged connection
	// gets for its proof: a round trip and the peer's work (one
	// HMAC-SHA256 to check rank 0's proof, one for its own).
	proofGraceShare = 4
)

// graces returns the hello and proof graces for an AuthTimeout: at most
// maxHelloGrace and a quarter of it, and a quarter of it.
func graces(authTimeout time.Duration) (hello, proof time.Duration) {
	proof = authTimeout / proofGraceShare
	return min(maxHelloGrace, proof), proof
}
