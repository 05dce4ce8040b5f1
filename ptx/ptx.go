// Package ptx holds the kernels of the collectives, made from gen/kernels
// by `go generate ./ptx` and embedded in the binary gzip-compressed, in
// two forms: PTX, which the CUDA driver JIT-compiles for whatever GPU it
// runs on, and machine code (cubins, Cubins) for the GPUs that matter,
// which it loads without compiling. The module needs no CUDA toolkit to
// build or run. An image is decompressed once per process, the first time
// it is asked for.
package ptx

//go:generate go run ../gen -out . -src ../gen/kernels

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"sync"
)

//go:embed *.ptx.gz *.cubin.gz
var embedded embed.FS

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
// rows; sm_90 (Hopper) and later: ISA 7.8 has the fp8 conversions for
// sm_90 only) and its NUL-terminated PTX text. Each call copies the text
// (about 6 MB).
func ForWire() (File, []byte, error) {
	for _, f := range manifest {
		if f.Wire {
			return withText(f)
		}
	}
	return File{}, nil, fmt.Errorf("ptx: no fp8 wire kernels")
}

// withText returns f and a copy of its text with a NUL appended.
func withText(f File) (File, []byte, error) {
	b, err := f.text()
	if err != nil {
		return File{}, nil, err
	}
	return f, append([]byte(nil), b...), nil
}

// text is f's PTX text with a NUL appended, shared: not to be modified.
func (f File) text() ([]byte, error) { return decompressed(f.Name + ".gz") }

// images holds, by embedded file name, a function that returns the file's
// decompressed content with a NUL appended, decompressing it on its first
// call.
var images sync.Map

// decompressed returns the content of the embedded gzip file name with a
// NUL appended (the driver takes PTX NUL-terminated; a cubin does not
// mind), decompressed once per process. The bytes are shared: callers must
// not modify them.
func decompressed(name string) ([]byte, error) {
	v, _ := images.LoadOrStore(name, sync.OnceValues(func() ([]byte, error) { return gunzip(name) }))
	return v.(func() ([]byte, error))()
}

// gunzip reads and decompresses the embedded file name, NUL appended.
func gunzip(name string) ([]byte, error) {
	z, err := embedded.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("ptx: %w", err)
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("ptx: %s: %w", name, err)
	}
	var b bytes.Buffer
	b.Grow(4 * len(z))
	if _, err := io.Copy(&b, r); err != nil {
		return nil, fmt.Errorf("ptx: %s: %w", name, err)
	}
	b.WriteByte(0)
	return b.Bytes(), nil
}
