package device

import (
	"fmt"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/ptx"
)

// Kernels is one element width's loaded kernels.
type Kernels struct {
	Widths []int // the file's vector widths, widest first
	Module driver.Module
	Ops    entryTable
	// Captured holds the ops' twins for Captured operations, which read
	// the token counts from the live table when a graph replays them.
	Captured entryTable
	// General holds the general entries of ptx.GeneralOps: uneven heads,
	// several tensors, strided inputs, HeadAllGather.
	General entryTable
	Start   driver.Function // the single-buffer start barrier
	Sync    driver.Function // the copy-engine mode's barrier
	Close   driver.Function // Close's farewell
}

// entryTable is a Kernels' functions of one kind, by operation and
// vector width.
type entryTable = map[ptx.Op]map[int]driver.Function

// lookupTable looks up the function of every operation of ops at every
// width of widths.
func lookupTable(ops []ptx.Op, widths []int, lookup func(ptx.Op, int) (driver.Function, error)) (entryTable, error) {
	t := entryTable{}
	for _, op := range ops {
		t[op] = map[int]driver.Function{}
		for _, w := range widths {
			f, err := lookup(op, w)
			if err != nil {
				return nil, err
			}
			t[op][w] = f
		}
	}
	return t, nil
}

// loadKernels loads the PTX of elemBytes-wide elements into ctx and looks
// up every entry the transport launches.
func loadKernels(ctx *driver.Context, elemBytes int) (*Kernels, error) {
	file, image, err := ptx.ForElemBytes(elemBytes)
	if err != nil {
		return nil, err
	}
	if uintptr(file.ArgsBytes) != unsafe.Sizeof(kernelabi.Args{}) {
		return nil, fmt.Errorf("a2a: kernels take %d parameter bytes, the host passes %d: %w", file.ArgsBytes, unsafe.Sizeof(kernelabi.Args{}), api.ErrNotSupported)
	}
	k := &Kernels{Widths: file.Widths()}
	if k.Module, err = ctx.LoadModule(image); err != nil {
		return nil, api.WrapDriver("loading kernels", err)
	}
	fn := func(e ptx.Entry) (driver.Function, error) {
		f, err := ctx.Function(k.Module, string(e))
		if err != nil {
			ctx.UnloadModule(k.Module)
			return 0, api.WrapDriver("loading kernels", err)
		}
		return f, nil
	}
	table := func(ops []ptx.Op, name func(ptx.Op, int) ptx.Entry) (entryTable, error) {
		return lookupTable(ops, k.Widths, func(op ptx.Op, w int) (driver.Function, error) { return fn(name(op, w)) })
	}
	if k.Ops, err = table(ptx.Ops, ptx.EntryFor); err != nil {
		return nil, err
	}
	if k.Captured, err = table(ptx.Ops, ptx.CapturedEntryFor); err != nil {
		return nil, err
	}
	if k.General, err = table(ptx.GeneralOps, ptx.GeneralEntryFor); err != nil {
		return nil, err
	}
	if k.Sync, err = fn(ptx.Sync); err != nil {
		return nil, err
	}
	if k.Start, err = fn(ptx.Start); err != nil {
		return nil, err
	}
	if k.Close, err = fn(ptx.Close); err != nil {
		return nil, err
	}
	return k, nil
}
