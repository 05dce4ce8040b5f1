package api

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor. The collectives only move bytes,
// so types of the same width share one kernel.
type DType uint8

// The supported element types.
const (
	BFloat16   DType = iota + 1 // bfloat16, 2 bytes
	Float16                     // IEEE half, 2 bytes
	Float8E4M3                  // fp8 e4m3, 1 byte
	Float8E5M2                  // fp8 e5m2, 1 byte
)

// Size returns the width of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case BFloat16, Float16:
		return 2
	case Float8E4M3, Float8E5M2:
		return 1
	}
	return 0
}

// String returns the usual short name of the type ("bf16", "fp16", "fp8e4m3", "fp8e5m2").
func (d DType) String() string {
	switch d {
	case BFloat16:
		return "bf16"
	case Float16:
		return "fp16"
	case Float8E4M3:
		return "fp8e4m3"
	case Float8E5M2:
		return "fp8e5m2"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Valid reports whether d is one of the supported types.
func (d DType) Valid() bool { return d.Size() != 0 }

// ParseDType reads a name as printed by String, in any case ("fp8" is
// taken as fp8e4m3).
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "bf16", "bfloat16":
		return BFloat16, nil
	case "fp16", "float16", "half":
		return Float16, nil
	case "fp8", "fp8e4m3", "float8_e4m3fn":
		return Float8E4M3, nil
	case "fp8e5m2", "float8_e5m2":
		return Float8E5M2, nil
	}
	return 0, fmt.Errorf("a2a: unknown dtype %q (want bf16, fp16, fp8 or fp8e5m2): %w", s, ErrDType)
}
