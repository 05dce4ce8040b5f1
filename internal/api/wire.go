package api

import (
	"fmt"
	"strings"
)

// Wire chooses how a Comm's 16-bit elements cross between the GPUs:
// exactly (the zero value), or as fp8 codes with one power-of-two scale per
// row of D elements (one head of one token), which moves about half the
// bytes and loses precision (internal/fp8 defines the format bit for bit).
type Wire uint8

const (
	// WireExact moves the elements as they are: the output equals the input.
	WireExact Wire = iota
	// WireE4M3 sends each row as E4M3 codes (3 mantissa bits) scaled by
	// 2^k, the smallest power of two that brings the row's largest finite
	// magnitude amax within 448. An element comes back within half an E4M3
	// step of its scaled binade: at most amax/16 per row, and a relative
	// error of at most 1/16 for elements of the row's top binades.
	WireE4M3
	// WireE5M2 sends E5M2 codes (2 mantissa bits, max 57344): twice
	// WireE4M3's error (amax/8 per row), with more range for small
	// elements beside a large one.
	WireE5M2
)

// String names the wire as the command line spells it.
func (w Wire) String() string {
	switch w {
	case WireExact:
		return "exact"
	case WireE4M3:
		return "e4m3"
	case WireE5M2:
		return "e5m2"
	}
	return fmt.Sprintf("Wire(%d)", uint8(w))
}

// Lossy reports whether w changes the values it moves.
func (w Wire) Lossy() bool { return w == WireE4M3 || w == WireE5M2 }

// Carries reports whether elements of dt can cross w: any type exactly,
// only the 16-bit ones (bf16, fp16) over an fp8 wire.
func (w Wire) Carries(dt DType) bool { return !w.Lossy() || dt.Size() == 2 }

// ParseWire reads a name as String prints it, in any case.
func ParseWire(s string) (Wire, error) {
	for _, w := range []Wire{WireExact, WireE4M3, WireE5M2} {
		if strings.EqualFold(s, w.String()) {
			return w, nil
		}
	}
	return 0, fmt.Errorf("a2a: wire %q: want exact, e4m3 or e5m2: %w", s, ErrConfig)
}
