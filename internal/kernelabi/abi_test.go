package kernelabi_test

import (
	"os"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/kernelabi/spec"
	"github.com/ulysses-go/ulysses/ptx"
)

// Stale generated files fail here, on any machine: run
// `go generate ./internal/kernelabi`, then `make ptx`.
func TestGeneratedFilesAreFresh(t *testing.T) {
	for path, want := range map[string][]byte{"abi_gen.go": spec.Go(), "../../gen/kernels/abi.cuh": spec.C()} {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s is stale: run `go generate ./internal/kernelabi` and `make ptx`", path)
	}
}

// The Go structs have the layout the header asserts to nvcc.
func TestGoLayoutIsTheSpecs(t *testing.T) {
	types := map[string]reflect.Type{
		"State":   reflect.TypeFor[kernelabi.State](),
		"Live":    reflect.TypeFor[kernelabi.Live](),
		"Signals": reflect.TypeFor[kernelabi.Signals](),
		"Status":  reflect.TypeFor[kernelabi.Status](),
		"Args":    reflect.TypeFor[kernelabi.Args](),
	}
	require.Len(t, spec.Structs, len(types))
	for _, s := range spec.Structs {
		typ, ok := types[s.Name]
		require.True(t, ok, "no Go type for struct %s", s.Name)
		placed, size := s.Layout()
		assert.Equal(t, uintptr(size), typ.Size(), "sizeof(%s)", s.Name)
		require.Equal(t, len(placed), typ.NumField(), "%s's fields", s.Name)
		for i, p := range placed {
			f := typ.Field(i)
			assert.Equal(t, p.GoName(), f.Name, "%s field %d", s.Name, i)
			assert.Equal(t, uintptr(p.Offset), f.Offset, "%s.%s", s.Name, f.Name)
			assert.Equal(t, uintptr(p.Bytes()), f.Type.Size(), "%s.%s", s.Name, f.Name)
		}
	}
}

// The literal layout, in case the description and both files drift
// together: the kernels' argument as the PTX declares it, and the offsets
// the kernels' tests and the buffer layout name.
func TestLayoutFigures(t *testing.T) {
	var a kernelabi.Args
	assert.Equal(t, uintptr(448), unsafe.Sizeof(a))
	for _, f := range ptx.Files() {
		assert.Equal(t, int(unsafe.Sizeof(a)), f.ArgsBytes, f.Name)
	}
	assert.Equal(t, uintptr(260), unsafe.Offsetof(a.Rank))
	assert.Equal(t, uintptr(284), unsafe.Offsetof(a.Half))
	var sig kernelabi.Signals
	assert.Equal(t, uintptr(131072), unsafe.Offsetof(sig.Bye))
	assert.Equal(t, uintptr(131104), unsafe.Offsetof(sig.Landed))
	assert.Equal(t, uintptr(131104+8*1024*4), unsafe.Sizeof(sig))
	assert.Equal(t, uintptr(16), unsafe.Sizeof(kernelabi.State{}))
	assert.Equal(t, uintptr(36), unsafe.Sizeof(kernelabi.Status{}))
	assert.Equal(t, uintptr(96), unsafe.Sizeof(kernelabi.Live{}))
}
