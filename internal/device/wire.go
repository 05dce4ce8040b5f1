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
	Ops    map[ptx.Op]map[int]driver.Function
	Decode map[int]driver.Function
}

// Wire returns the fp8 wire's kernels of w for 16-bit type dt. The first
// call on a device loads the wire's module (about 1 MB of PTX, compiled by
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
	k := &WireKernels{Ops: map[ptx.Op]map[int]driver.Function{}, Decode: map[int]driver.Function{}}
	for _, width := range ptx.WireWidths {
		for _, op := range ptx.WireOps {
			if k.Ops[op] == nil {
				k.Ops[op] = map[int]driver.Function{}
			}
			f, err := s.Ctx.Function(s.wireModule, string(ptx.WireEntryFor(op, format, out, width)))
			if err != nil {
				return nil, api.WrapDriver("loading the fp8 wire's kernels", err)
			}
			k.Ops[op][width] = f
		}
		f, err := s.Ctx.Function(s.wireModule, string(ptx.WireDecodeFor(format, out, width)))
		if err != nil {
			return nil, api.WrapDriver("loading the fp8 wire's kernels", err)
		}
		k.Decode[width] = f
	}
	return k, nil
}
