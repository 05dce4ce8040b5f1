package ref

import (
	"encoding/binary"
	"fmt"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fp8"
)

// RoundTripRows replaces, in place, every row of headDim elements of b
// (little-endian bf16 or fp16, dt) by what the fp8 wire w delivers for it:
// the row's codes under its power-of-two scale, decoded back to dt
// (internal/fp8 defines each step bit for bit). Every collective moves
// whole rows, so over a lossy wire each output is the exact output with
// RoundTripRows applied: the reference the GPU's result must equal byte
// for byte. It is idempotent. WireExact leaves b as it is. One pass over
// b; it allocates one row.
func RoundTripRows(w a2a.Wire, dt a2a.DType, b []byte, headDim int) error {
	if !w.Lossy() {
		return nil
	}
	fw, half := fp8.WireE4M3, fp8.BF16
	if w == a2a.WireE5M2 {
		fw = fp8.WireE5M2
	}
	switch dt {
	case a2a.BFloat16:
	case a2a.Float16:
		half = fp8.FP16
	default:
		return fmt.Errorf("ref: the %v wire moves bf16 or fp16, not %v: %w", w, dt, ErrShape)
	}
	if headDim < 1 || len(b)%(2*headDim) != 0 {
		return fmt.Errorf("ref: %d bytes are not rows of %d 16-bit elements: %w", len(b), headDim, ErrShape)
	}
	row := make([]uint16, headDim)
	for off := 0; off < len(b); off += 2 * headDim {
		for i := range row {
			row[i] = binary.LittleEndian.Uint16(b[off+2*i:])
		}
		if err := fp8.RoundTripRows(fw, half, row, headDim); err != nil {
			return err
		}
		for i, u := range row {
			binary.LittleEndian.PutUint16(b[off+2*i:], u)
		}
	}
	return nil
}
