package a2a

import "github.com/ulysses-go/ulysses/internal/api"

// Wire chooses how a Comm's 16-bit elements cross between the GPUs
// (Config.Wire): exactly (WireExact, the zero value), or as fp8 codes
// (WireE4M3, WireE5M2) with one power-of-two scale per row of D elements
// (one head of one token), which moves about half the bytes and loses
// precision. Every rank must choose the same.
type Wire uint8

const (
	// WireExact moves the elements as they are: the output equals the input.
	WireExact Wire = iota
	// WireE4M3 sends each row as E4M3 codes scaled by 2^k, the smallest
	// power of two that brings the row's largest finite magnitude amax
	// within 448: every element comes back within amax/16 (half an E4M3
	// step at the row's top binade), nearer for smaller elements.
	WireE4M3
	// WireE5M2 sends E5M2 codes (max 57344): within amax/8 per row, with
	// more range for small elements beside a large one.
	WireE5M2
)

// String names the wire: "exact", "e4m3" or "e5m2".
func (w Wire) String() string { return api.Wire(w).String() }

// Lossy reports whether w changes the values it moves.
func (w Wire) Lossy() bool { return api.Wire(w).Lossy() }

// Carries reports whether elements of dt can cross w: any type exactly,
// only the 16-bit ones (bf16, fp16) over an fp8 wire.
func (w Wire) Carries(dt DType) bool { return api.Wire(w).Carries(api.DType(dt)) }

// ParseWire reads a wire's name as Wire.String prints it, in any case. An
// unknown name matches ErrConfig.
func ParseWire(s string) (Wire, error) {
	w, err := api.ParseWire(s)
	return Wire(w), err
}
