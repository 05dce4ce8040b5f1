package exchange

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wireSentinels are the sentinels an error frame can carry, by code.
var wireSentinels = map[errorCode]error{
	codeProtocol:      ErrProtocol,
	codeFrameTooLarge: ErrFrameTooLarge,
	codeWorldSize:     ErrWorldSize,
	codeRank:          ErrRank,
	codeAuth:          ErrAuth,
	codeBusy:          errBusy,
}

var allSentinels = []error{ErrProtocol, ErrFrameTooLarge, ErrWorldSize, ErrRank, ErrAuth, ErrClosed, ErrNoSecret, errBusy}

// TestErrorCodesRoundTrip: every code survives encodeError/decodeError and
// matches its own sentinel and no other; the numbers are the wire format's.
func TestErrorCodesRoundTrip(t *testing.T) {
	require.Len(t, codeSentinels, len(wireSentinels)+1, "codeSentinels and wireSentinels disagree")
	cases := map[errorCode]error{codeNone: nil}
	for c, s := range wireSentinels {
		cases[c] = s
	}
	for code, sentinel := range cases {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			p := encodeError(sentinel, "rank 3 did something")
			assert.Equal(t, append([]byte{byte(code)}, "rank 3 did something"...), p)
			e := decodeError(p)
			for _, s := range allSentinels {
				if s == sentinel {
					assert.ErrorIs(t, e, s)
				} else {
					assert.NotErrorIs(t, e, s)
				}
			}
			if sentinel == nil {
				assert.Equal(t, "rank 3 did something", e.Error())
			} else {
				assert.Equal(t, "rank 3 did something: "+sentinel.Error(), e.Error())
			}
		})
	}
	// The numbers are part of the protocol: changing one needs a new
	// protocolVersion.
	assert.Equal(t, errorCode(0), codeNone)
	assert.Equal(t, errorCode(1), codeProtocol)
	assert.Equal(t, errorCode(2), codeFrameTooLarge)
	assert.Equal(t, errorCode(3), codeWorldSize)
	assert.Equal(t, errorCode(4), codeRank)
	assert.Equal(t, errorCode(5), codeAuth)
	assert.Equal(t, errorCode(6), codeBusy)
}

// TestEncodeErrorWithoutCode: sentinels that never travel, and other
// errors, encode as codeNone.
func TestEncodeErrorWithoutCode(t *testing.T) {
	for _, s := range []error{nil, ErrClosed, errors.New("bad rank"), fmt.Errorf("wrapped: %w", ErrRank)} {
		p := encodeError(s, "m")
		assert.Equal(t, byte(codeNone), p[0], "%v", s)
	}
}

// TestReason: what an error frame carries for an error: its sentinel's
// code, and its text without the sentinel's, which decodeError adds back.
func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err      error
		sentinel error
		msg      string
	}{
		{fmt.Errorf("rank 2 sent junk: %w", ErrProtocol), ErrProtocol, "rank 2 sent junk"},
		{fmt.Errorf("wrapped: %w", fmt.Errorf("no MAC: %w", ErrAuth)), ErrAuth, "wrapped: no MAC"},
		{errors.New("write: broken pipe"), nil, "write: broken pipe"},
		{fmt.Errorf("closed: %w", ErrClosed), nil, "closed: exchanger closed"},
	} {
		msg, s := reason(tc.err)
		assert.Equal(t, tc.sentinel, s, "%v", tc.err)
		assert.Equal(t, tc.msg, msg)
		assert.Equal(t, tc.err.Error(), decodeError(encodeError(s, msg)).Error())
	}
}

func TestDecodeErrorUnknownCode(t *testing.T) {
	for c := len(codeSentinels); c <= 255; c++ {
		e := decodeError(append([]byte{byte(c)}, "from a newer rank 0"...))
		require.ErrorIs(t, e, ErrProtocol, "code %d", c)
		for _, s := range []error{ErrFrameTooLarge, ErrWorldSize, ErrRank, ErrAuth, ErrClosed} {
			assert.NotErrorIs(t, e, s)
		}
		assert.Equal(t, fmt.Sprintf("from a newer rank 0 (unknown error code %d): protocol error", c), e.Error())
	}
}

// TestDecodeErrorTruncated: a payload too short for a code is a protocol
// error; a code without a message still says something.
func TestDecodeErrorTruncated(t *testing.T) {
	for _, p := range [][]byte{nil, {}} {
		e := decodeError(p)
		require.ErrorIs(t, e, ErrProtocol)
		assert.Equal(t, "error frame without an error code: protocol error", e.Error())
	}
	e := decodeError([]byte{byte(codeRank)})
	require.ErrorIs(t, e, ErrRank)
	assert.Equal(t, "no reason given: bad rank", e.Error())
}

// TestErrorMessageCleaning: messages are cut to maxErrorMessage bytes and
// made printable UTF-8, on both sides.
func TestErrorMessageCleaning(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain words, ünïcode and 漢字", "plain words, ünïcode and 漢字"},
		{"bad\xffutf8\xc3", "bad?utf8?"},
		{"line\nbreak\tand \x1b[31mescape", "line?break?and ?[31mescape"},
		{"zero\u200bwidth", "zero?width"},
		{"", "no reason given"},
	} {
		assert.Equal(t, tc.want, cleanMessage(tc.in), "%q", tc.in)
		assert.Equal(t, tc.want, decodeError(append([]byte{byte(codeNone)}, tc.in...)).Error(), "%q", tc.in)
		assert.Equal(t, tc.want, string(encodeError(nil, tc.in)[1:]), "%q", tc.in)
	}

	long := strings.Repeat("é", maxErrorMessage) // 2 bytes each
	p := encodeError(ErrRank, long)
	assert.Len(t, p, 1+maxErrorMessage)
	assert.True(t, utf8.Valid(p[1:]))

	// A huge message from the network costs no more than the cap.
	huge := append([]byte{byte(codeWorldSize)}, bytes.Repeat([]byte("x"), 10<<20)...)
	e := decodeError(huge)
	require.ErrorIs(t, e, ErrWorldSize)
	assert.Len(t, e.msg, maxErrorMessage)
}

// TestSentinelTexts: sentinels come last in messages, so they carry no
// package prefix, and each reads differently.
func TestSentinelTexts(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range allSentinels {
		assert.NotContains(t, s.Error(), "exchange:")
		assert.False(t, seen[s.Error()], "duplicate sentinel text %q", s)
		seen[s.Error()] = true
	}
}
