package a2a

import "github.com/ulysses-go/ulysses/internal/api"

// DType is the element type of a tensor: BFloat16, Float16, Float8E4M3
// or Float8E5M2. The operations only move bytes, so types of the same
// width share one kernel, and elements arrive bit-exact unless a lossy
// Wire rounds them.
type DType uint8

// The supported element types.
const (
	BFloat16   DType = iota + 1 // bfloat16, 2 bytes
	Float16                     // IEEE half, 2 bytes
	Float8E4M3                  // fp8 e4m3, 1 byte
	Float8E5M2                  // fp8 e5m2, 1 byte
)

// Size returns the width of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int { return api.DType(d).Size() }

// String returns the type's short name: "bf16", "fp16", "fp8e4m3" or
// "fp8e5m2" (ParseDType reads them back).
func (d DType) String() string { return api.DType(d).String() }

// Valid reports whether d is one of the supported types.
func (d DType) Valid() bool { return api.DType(d).Valid() }

// ParseDType reads a name as DType's String prints it, in any case ("fp8"
// is taken as fp8e4m3; "bfloat16", "float16", "half", "float8_e4m3fn" and
// "float8_e5m2" too). An unknown name matches ErrDType.
func ParseDType(s string) (DType, error) {
	d, err := api.ParseDType(s)
	return DType(d), err
}
