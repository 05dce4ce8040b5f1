package device

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/ptx"
)

// Kind is which of an operation's exact entries a launch takes.
type Kind int

// The kinds of exact entries.
const (
	Plain    Kind = iota // ptx.EntryFor
	Captured             // ptx.CapturedEntryFor: reads the token counts from the live table when a graph replays it
	General              // ptx.GeneralEntryFor: uneven heads, several tensors, strided inputs, HeadAllGather
	kinds
)

// Kernels is one element width's exact kernels on a device. Their
// functions are loaded with the share where machine code runs there;
// else the barriers' (ptx.FamilyBase) are, and each operation's the first
// time Load asks for them.
type Kernels struct {
	Widths []int // the file's vector widths, widest first
	set    *moduleSet
	tables [kinds]entryTable
	start  int // the single-buffer start barrier
	sync   int // the copy-engine mode's barrier
	close  int // Close's farewell
}

// entryTable is a file's entries of one kind (indices into the file's
// entries), by operation and vector width.
type entryTable = map[ptx.Op]map[int]int

// lookupTable finds the entry of every operation of ops at every width of
// widths in m.
func lookupTable(m *moduleSet, ops []ptx.Op, widths []int, name func(ptx.Op, int) ptx.Entry) (entryTable, error) {
	t := entryTable{}
	for _, op := range ops {
		t[op] = map[int]int{}
		for _, w := range widths {
			i, err := m.entry(name(op, w))
			if err != nil {
				return nil, err
			}
			t[op][w] = i
		}
	}
	return t, nil
}

// loadKernels prepares the kernels of every file the device can run and
// loads what the first Comm there loads (newModuleSet).
func (s *Share) loadKernels(drv *driver.Driver) error {
	major, err := drv.DeviceAttribute(s.Ordinal, driver.AttrComputeCapabilityMajor)
	if err != nil {
		return api.WrapDriver("reading the compute capability", err)
	}
	minor, err := drv.DeviceAttribute(s.Ordinal, driver.AttrComputeCapabilityMinor)
	if err != nil {
		return api.WrapDriver("reading the compute capability", err)
	}
	for _, f := range filesFor(major, minor) {
		if uintptr(f.ArgsBytes) != unsafe.Sizeof(kernelabi.Args{}) {
			return fmt.Errorf("a2a: kernels take %d parameter bytes, the host passes %d: %w", f.ArgsBytes, unsafe.Sizeof(kernelabi.Args{}), api.ErrNotSupported)
		}
		if f.Wire {
			if s.wire, err = newModuleSet(s, f, major, minor); err != nil {
				return err
			}
			s.codes = append(s.codes, s.wire.code)
			continue
		}
		m, err := newModuleSet(s, f, major, minor, ptx.FamilyBase)
		if err != nil {
			return err
		}
		s.codes = append(s.codes, m.code)
		// Kept before the lookups, so that teardown unloads what loaded.
		s.Kernels[f.ElemBytes] = &Kernels{Widths: f.Widths(), set: m}
		if err := s.Kernels[f.ElemBytes].lookup(); err != nil {
			return err
		}
	}
	return nil
}

// lookup fills k's tables from its file.
func (k *Kernels) lookup() error {
	var err error
	names := [kinds]func(ptx.Op, int) ptx.Entry{ptx.EntryFor, ptx.CapturedEntryFor, ptx.GeneralEntryFor}
	for kind, ops := range [kinds][]ptx.Op{ptx.Ops, ptx.Ops, ptx.GeneralOps} {
		if k.tables[kind], err = lookupTable(k.set, ops, k.Widths, names[kind]); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		dst  *int
		name ptx.Entry
	}{{&k.start, ptx.Start}, {&k.sync, ptx.Sync}, {&k.close, ptx.Close}} {
		if *e.dst, err = k.set.entry(e.name); err != nil {
			return err
		}
	}
	return nil
}

// Load makes sure the function of op's entry of kind at width is loaded:
// at once where it is (always after the first call, and with machine
// code); else it loads the operation's family of PTX, waiting first, for
// at most timeout, until no Comm of the process on the device has work
// queued (Share.load). Allocation-free once loaded.
func (k *Kernels) Load(kind Kind, op ptx.Op, width int, timeout time.Duration) error {
	i, ok := k.tables[kind][op][width]
	if !ok {
		return fmt.Errorf("a2a: no %s kernel of kind %d for %d-byte vectors: %w", op, kind, width, api.ErrNotSupported)
	}
	return k.set.ensure(i, timeout)
}

// Func returns the function of op's entry of kind at width, 0 unless Load
// has loaded it. Allocation-free.
func (k *Kernels) Func(kind Kind, op ptx.Op, width int) driver.Function {
	i, ok := k.tables[kind][op][width]
	if !ok {
		return 0
	}
	return k.set.fn(i)
}

// Start, Sync and Close return the barriers, loaded with the share.
func (k *Kernels) Start() driver.Function { return k.set.fn(k.start) }

// Sync is the copy-engine mode's barrier.
func (k *Kernels) Sync() driver.Function { return k.set.fn(k.sync) }

// Close is Close's farewell.
func (k *Kernels) Close() driver.Function { return k.set.fn(k.close) }

// Loaded lists the functions of op's entries of kind that are loaded, by
// width: for debugging aids.
func (k *Kernels) Loaded(kind Kind, op ptx.Op) map[int]driver.Function {
	out := map[int]driver.Function{}
	for w, i := range k.tables[kind][op] {
		if f := k.set.fn(i); f != 0 {
			out[w] = f
		}
	}
	return out
}

// Codes returns how each PTX file's kernels reached the device, fixed
// when the share was made.
func (s *Share) Codes() []Code { return append([]Code(nil), s.codes...) }
