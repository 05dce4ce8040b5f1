package device

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// WireKernels is the fp8 wire's entries for one format and 16-bit type:
// the exchange of each operation and the decode, by width
// (ptx.WireWidths).
type WireKernels struct {
	Ops    entryTable
	Decode map[int]driver.Function
}

// Wire returns the fp8 wire's kernels of w for 16-bit type dt. The first
// call on a device loads the wire's module (about 6 MB of PTX, compiled by
// the driver once per process and device, which needs compute capability
// 9.0 or later); later calls only look its functions up.
func (s *Share) Wire(w api.Wire, dt api.DType) (*WireKernels, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wireModule == 0 {
		_, image, err := ptx.ForWire()
		if err != nil {
			return nil, err
		}
		m, err := s.Ctx.LoadModule(image)
		if err != nil {
			return nil, api.WrapDriver("loading the fp8 wire's kernels", err)
		}
		s.wireModule = m
	}
	format, out := w.String(), dt.String() // as the entries spell them: e4m3/e5m2, bf16/fp16
	find := func(e ptx.Entry) (driver.Function, error) {
		f, err := s.Ctx.Function(s.wireModule, string(e))
		if err != nil {
			return 0, api.WrapDriver("loading the fp8 wire's kernels", err)
		}
		return f, nil
	}
	ops, err := lookupTable(ptx.WireOps, ptx.WireWidths, func(op ptx.Op, w int) (driver.Function, error) {
		return find(ptx.WireEntryFor(op, format, out, w))
	})
	if err != nil {
		return nil, err
	}
	k := &WireKernels{Ops: ops, Decode: map[int]driver.Function{}}
	for _, w := range ptx.WireWidths {
		if k.Decode[w], err = find(ptx.WireDecodeFor(format, out, w)); err != nil {
			return nil, err
		}
	}
	return k, nil
}
