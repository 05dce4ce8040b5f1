// Package ptx holds the kernels of the collectives as PTX, made from
// gen/kernels by `go generate ./ptx` and embedded in the binary. The CUDA
// driver JIT-compiles them for the GPU at load time, so the module needs no
// CUDA toolkit to build or run.
package ptx

//go:generate go run ../gen -out . -src ../gen/kernels

import (
	"embed"
	"fmt"
)

//go:embed *.ptx
var files embed.FS

// Files describes every embedded PTX file.
func Files() []File {
	return append([]File(nil), manifest...)
}

// ForElemBytes returns the file for n-byte elements and its NUL-terminated
// PTX text, ready for the driver. Each call copies the text (about 1.2 MB).
func ForElemBytes(n int) (File, []byte, error) {
	for _, f := range manifest {
		if f.ElemBytes == n && !f.Wire {
			return withText(f)
		}
	}
	return File{}, nil, fmt.Errorf("ptx: no kernels for %d-byte elements", n)
}

// ForWire returns the fp8 wire's file (16-bit elements exchanged as fp8
// rows; sm_90 (Hopper) and later: ISA 7.8 has the fp8 conversions for sm_90 only) and its NUL-terminated PTX text. Each call copies
// the text (about 1 MB).
func ForWire() (File, []byte, error) {
	for _, f := range manifest {
		if f.Wire {
			return withText(f)
		}
	}
	return File{}, nil, fmt.Errorf("ptx: no fp8 wire kernels")
}

// withText returns f and its text with a NUL appended.
func withText(f File) (File, []byte, error) {
	b, err := files.ReadFile(f.Name)
	if err != nil {
		return File{}, nil, fmt.Errorf("ptx: %w", err)
	}
	return f, append(b, 0), nil
}
