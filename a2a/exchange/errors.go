package exchange

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Sentinel errors. Every error this package returns reads
// "exchange: <what happened>: <cause>" and wraps the matching sentinel (or
// the context's error), so callers can test with errors.Is. The sentinel
// texts carry no "exchange:" prefix because they come last, as the cause.
var (
	// ErrProtocol reports a malformed frame or blob list: bad magic or
	// version (a peer speaking another protocol version gets this), unknown
	// kind, truncated data, inconsistent lengths, or a result that does not
	// match what was sent.
	ErrProtocol = errors.New("protocol error")
	// ErrFrameTooLarge reports a frame or blob larger than the configured
	// limit. It is distinct from ErrProtocol.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrWorldSize reports a peer (or a configuration) with a different or
	// invalid world size.
	ErrWorldSize = errors.New("bad world size")
	// ErrRank reports a duplicate or out-of-range rank.
	ErrRank = errors.New("bad rank")
	// ErrClosed reports use of an exchanger after Close.
	ErrClosed = errors.New("exchanger closed")
	// ErrAuth reports a frame without a valid MAC under the group's
	// secret: on a peer, a challenge, result or commit from a process that
	// is not rank 0 of the group (a stranger listening on the address, or
	// a rank 0 with another secret). Rank 0 does not fail a round for a
	// connection that does not prove the secret: it drops it and goes on
	// waiting; if the round then fails (its context ends), the error
	// wraps ErrAuth too and names the last such connection (a peer whose
	// secret differs says so). It fails a round with ErrAuth for a peer
	// that proved the secret and then acknowledges the result with a bad
	// MAC, or refuses it for one.
	ErrAuth = errors.New("authentication failed")
	// ErrNoSecret reports a TCPConfig without a usable secret: empty, or
	// shorter than MinSecretSize.
	ErrNoSecret = errors.New("no usable secret")
)

// errBusy is what a peer's connection gets when rank 0 closes it after
// the challenge and before it took the blob, to make room for a newer
// one or at its deadline: the peer dials again. Peers never return it.
var errBusy = errors.New("dial again")

// errorCode is the first byte of an error frame's payload: which sentinel
// the error it reports matches.
type errorCode uint8

// Error codes. The numbers are part of the wire format.
const (
	codeNone          errorCode = 0 // no sentinel
	codeProtocol      errorCode = 1 // ErrProtocol
	codeFrameTooLarge errorCode = 2 // ErrFrameTooLarge
	codeWorldSize     errorCode = 3 // ErrWorldSize
	codeRank          errorCode = 4 // ErrRank
	codeAuth          errorCode = 5 // ErrAuth (since version 3)
	codeBusy          errorCode = 6 // errBusy: dial again (a receiver that does not know it fails with ErrProtocol)
)

// codeSentinels maps each known code to its sentinel; codes past its end
// are unknown.
var codeSentinels = [...]error{
	codeNone:          nil,
	codeProtocol:      ErrProtocol,
	codeFrameTooLarge: ErrFrameTooLarge,
	codeWorldSize:     ErrWorldSize,
	codeRank:          ErrRank,
	codeAuth:          ErrAuth,
	codeBusy:          errBusy,
}

// maxErrorMessage caps the message of an error frame, sent or received.
const maxErrorMessage = 4096

// encodeError builds an error frame's payload: the code of sentinel (nil,
// or one without a code, gives codeNone) followed by msg as cleanMessage
// makes it. The payload is at most 1+maxErrorMessage bytes.
func encodeError(sentinel error, msg string) []byte {
	code := codeNone
	for c, s := range codeSentinels {
		if s != nil && s == sentinel {
			code = errorCode(c)
		}
	}
	return append([]byte{byte(code)}, cleanMessage(msg)...)
}

// decodeError parses an error frame's payload into the error it reports.
// It never fails: a payload without a code or with an unknown code gives
// an error that matches ErrProtocol (keeping what message there is). The
// message is cut to maxErrorMessage bytes before anything is copied.
func decodeError(p []byte) *remoteError {
	if len(p) == 0 {
		return &remoteError{msg: "error frame without an error code", sentinel: ErrProtocol}
	}
	code, rest := errorCode(p[0]), p[1:]
	if len(rest) > maxErrorMessage {
		rest = rest[:maxErrorMessage]
	}
	msg := cleanMessage(string(rest))
	if int(code) >= len(codeSentinels) {
		return &remoteError{msg: fmt.Sprintf("%s (unknown error code %d)", msg, code), sentinel: ErrProtocol}
	}
	return &remoteError{msg: msg, sentinel: codeSentinels[code]}
}

// cleanMessage makes s fit for an error frame and for logs: at most
// maxErrorMessage bytes, valid UTF-8, printable ("?" replaces the rest),
// and not empty.
func cleanMessage(s string) string {
	if len(s) > maxErrorMessage {
		s = s[:maxErrorMessage]
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, strings.ToValidUTF8(s, "?"))
	if s == "" {
		return "no reason given"
	}
	return s
}

// sentinelOf returns the sentinel with an error code that err matches,
// or nil.
func sentinelOf(err error) error {
	for _, s := range codeSentinels {
		if s != nil && errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// reason splits err into what an error frame carries: err's text without
// the text of the sentinel with a code that err matches (the receiver adds
// it back), and that sentinel (or nil).
func reason(err error) (msg string, sentinel error) {
	sentinel = sentinelOf(err)
	msg = err.Error()
	if sentinel != nil {
		msg = strings.TrimSuffix(msg, ": "+sentinel.Error())
	}
	return msg, sentinel
}

// remoteError is the reason an error frame from rank 0 gives; it unwraps
// to the sentinel its code names, if any.
type remoteError struct {
	msg      string
	sentinel error // nil for codeNone
}

func (e *remoteError) Error() string {
	if e.sentinel == nil {
		return e.msg
	}
	return e.msg + ": " + e.sentinel.Error()
}

func (e *remoteError) Unwrap() error { return e.sentinel }
