package device

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// WireKernels is the fp8 wire's entries for one format and 16-bit type:
// the exchange of each operation and the decode, by width
// (ptx.WireWidths). Loaded as the exact kernels are (Kernels).
type WireKernels struct {
	set    *moduleSet
	ops    entryTable
	decode map[int]int
	// For a transport that sends the codes itself: the pack and unpack by
	// width.
	pack, unpack map[int]int
}

// Wire returns the fp8 wire's kernels of w for 16-bit type dt: where the
// device has machine code for them they were loaded with the share; else
// Load loads the families an operation needs, the first time. It looks up
// names only and waits for nothing.
func (s *Share) Wire(w api.Wire, dt api.DType) (*WireKernels, error) {
	if s.wire == nil {
		return nil, fmt.Errorf("a2a: GPU %d cannot run the fp8 wire's kernels: %w", s.Ordinal, api.ErrNotSupported)
	}
	format, out := w.String(), dt.String() // as the entries spell them: e4m3/e5m2, bf16/fp16
	ops, err := lookupTable(s.wire, ptx.WireOps, ptx.WireWidths, func(op ptx.Op, w int) ptx.Entry {
		return ptx.WireEntryFor(op, format, out, w)
	})
	if err != nil {
		return nil, err
	}
	k := &WireKernels{set: s.wire, ops: ops, decode: map[int]int{}, pack: map[int]int{}, unpack: map[int]int{}}
	for _, w := range ptx.WireWidths {
		if k.decode[w], err = s.wire.entry(ptx.WireDecodeFor(format, out, w)); err != nil {
			return nil, err
		}
		if k.pack[w], err = s.wire.entry(ptx.WirePackFor(format, out, w)); err != nil {
			return nil, err
		}
		if k.unpack[w], err = s.wire.entry(ptx.WireUnpackFor(format, out, w)); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// Load makes sure op's exchange at width and, with decode, the decode at
// decodeWidth are loaded, as Kernels.Load does. Allocation-free once they
// are.
func (k *WireKernels) Load(op ptx.Op, width, decodeWidth int, decode bool, timeout time.Duration) error {
	i, ok := k.ops[op][width]
	if !ok {
		return fmt.Errorf("a2a: no fp8 wire kernel of %s for %d-byte vectors: %w", op, width, api.ErrNotSupported)
	}
	if err := k.set.ensure(i, timeout); err != nil || !decode {
		return err
	}
	return k.ensureAt(k.decode, decodeWidth, "decode", timeout)
}

// ensureAt makes sure entry m[width] (what names it in the error) is
// loaded, as Load does.
func (k *WireKernels) ensureAt(m map[int]int, width int, what string, timeout time.Duration) error {
	i, ok := m[width]
	if !ok {
		return fmt.Errorf("a2a: no fp8 wire %s for %d-byte vectors: %w", what, width, api.ErrNotSupported)
	}
	return k.set.ensure(i, timeout)
}

// Op returns the exchange of op at width, 0 unless loaded. Allocation-free.
func (k *WireKernels) Op(op ptx.Op, width int) driver.Function {
	i, ok := k.ops[op][width]
	if !ok {
		return 0
	}
	return k.set.fn(i)
}

// Decode returns the decode at width, 0 unless loaded. Allocation-free.
func (k *WireKernels) Decode(width int) driver.Function { return k.loaded(k.decode, width) }

// LoadPacks makes sure the pack at width and the unpack at unpackWidth are
// loaded, as Load does.
func (k *WireKernels) LoadPacks(width, unpackWidth int, timeout time.Duration) error {
	if err := k.ensureAt(k.pack, width, "pack", timeout); err != nil {
		return err
	}
	return k.ensureAt(k.unpack, unpackWidth, "unpack", timeout)
}

// Pack returns the pack at width, 0 unless loaded. Allocation-free.
func (k *WireKernels) Pack(width int) driver.Function { return k.loaded(k.pack, width) }

// Unpack returns the unpack at width, 0 unless loaded. Allocation-free.
func (k *WireKernels) Unpack(width int) driver.Function { return k.loaded(k.unpack, width) }

// loaded returns entry m[width]'s function, 0 where there is none or it is
// not loaded.
func (k *WireKernels) loaded(m map[int]int, width int) driver.Function {
	i, ok := m[width]
	if !ok {
		return 0
	}
	return k.set.fn(i)
}
