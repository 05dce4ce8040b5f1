package ptx

import (
	"fmt"
	"sync"

	"github.com/ulysses-go/ulysses/internal/ptxtext"
)

// Family names entries of one File that load together, as one module,
// where the driver JIT-compiles the PTX: a process compiles only the
// families its operations use. The exact kernels' families are FamilyBase
// and one per operation (all its widths, plain, captured and general:
// every rank of a group running that operation needs the same family,
// whatever its width); the wire's are one per operation, format and
// 16-bit type, one per format and type for the decode, and one per format
// and type for the packs and unpacks of a transport that sends the codes
// itself.
type Family string

// FamilyBase holds the entries every Comm may launch whatever it runs:
// the start barrier, the copy-engine barrier, the farewell, and the
// narrowest AllGather (the operation that moves nothing before a graph's
// replay). The process's first Comm on a device loads it.
const FamilyBase Family = "base"

// The fp8 formats and 16-bit types the wire's entries are named by.
var (
	wireFormats = []string{"e4m3", "e5m2"}
	wireOutputs = []string{"bf16", "fp16"}
)

// WireFamily is the family of the wire's entries of op (one of WireOps)
// for format and 16-bit type out, as WireEntryFor names them.
func WireFamily(op Op, format, out string) Family {
	return Family(fmt.Sprintf("wire_%s_%s_%s", format, out, op))
}

// WireDecodeFamily is the family of the wire's decodes for format and
// type out.
func WireDecodeFamily(format, out string) Family {
	return Family(fmt.Sprintf("wire_%s_%s_decode", format, out))
}

// WirePackFamily is the family of the wire's packs and unpacks for format
// and type out: what a transport that sends the codes itself loads.
func WirePackFamily(format, out string) Family {
	return Family(fmt.Sprintf("wire_%s_%s_pack", format, out))
}

var familyMaps sync.Map // by familyKey: func() map[Entry]Family, built once

type familyKey struct {
	elemBytes int
	wire      bool
}

// families maps every entry name the package can give to its family in a
// file for elemBytes-wide elements (or the wire's); built once, shared.
func families(elemBytes int, wire bool) map[Entry]Family {
	v, _ := familyMaps.LoadOrStore(familyKey{elemBytes, wire}, sync.OnceValue(func() map[Entry]Family { return familyMap(elemBytes, wire) }))
	return v.(func() map[Entry]Family)()
}

// familyMap is families, built.
func familyMap(elemBytes int, wire bool) map[Entry]Family {
	m := map[Entry]Family{}
	if wire {
		for _, format := range wireFormats {
			for _, out := range wireOutputs {
				for _, w := range WireWidths {
					for _, op := range WireOps {
						m[WireEntryFor(op, format, out, w)] = WireFamily(op, format, out)
					}
					m[WireDecodeFor(format, out, w)] = WireDecodeFamily(format, out)
					m[WirePackFor(format, out, w)] = WirePackFamily(format, out)
					m[WireUnpackFor(format, out, w)] = WirePackFamily(format, out)
				}
			}
		}
		return m
	}
	for _, w := range vectorWidths {
		for _, op := range Ops {
			m[EntryFor(op, w)] = Family(op)
			m[CapturedEntryFor(op, w)] = Family(op)
		}
		for _, op := range GeneralOps {
			m[GeneralEntryFor(op, w)] = Family(op)
		}
	}
	for _, e := range []Entry{Start, Sync, Close, EntryFor(OpAllGather, elemBytes)} {
		m[e] = FamilyBase
	}
	return m
}

// FamilyOf returns the family of f's entry e; false if f has no entry e.
func (f File) FamilyOf(e Entry) (Family, bool) {
	if !f.HasEntry(e) {
		return "", false
	}
	fam, ok := families(f.ElemBytes, f.Wire)[e]
	return fam, ok
}

// Families lists f's families, in the order of their first entry.
func (f File) Families() []Family {
	m := families(f.ElemBytes, f.Wire)
	var out []Family
	seen := map[Family]bool{}
	for _, e := range f.Entries {
		if fam, ok := m[e]; ok && !seen[fam] {
			seen[fam] = true
			out = append(out, fam)
		}
	}
	return out
}

// FamilyEntries lists f's entries of family fam, in file order.
func (f File) FamilyEntries(fam Family) []Entry {
	m := families(f.ElemBytes, f.Wire)
	var out []Entry
	for _, e := range f.Entries {
		if m[e] == fam {
			out = append(out, e)
		}
	}
	return out
}

// FamilyImage returns the PTX of f's entries of family fam alone, with
// f's header, NUL-terminated: a module of its own. It is cut from f's
// text (decompressed once per process) at each call.
func (f File) FamilyImage(fam Family) ([]byte, error) {
	text, split, err := f.split()
	if err != nil {
		return nil, err
	}
	m := families(f.ElemBytes, f.Wire)
	var idx []int
	for i, s := range split.Entries {
		if m[Entry(s.Name)] == fam {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("ptx: %s has no entries of family %q", f.Name, fam)
	}
	return split.Image(text, idx), nil
}

var splits sync.Map // by file name: func() (ptxtext.File, error), split once

// split returns f's text (without its NUL) and where its entries lie.
func (f File) split() ([]byte, ptxtext.File, error) {
	text, err := f.text()
	if err != nil {
		return nil, ptxtext.File{}, err
	}
	text = text[:len(text)-1]
	v, _ := splits.LoadOrStore(f.Name, sync.OnceValues(func() (ptxtext.File, error) { return ptxtext.Split(text) }))
	s, err := v.(func() (ptxtext.File, error))()
	if err != nil {
		return nil, ptxtext.File{}, fmt.Errorf("ptx: %s: %w", f.Name, err)
	}
	return text, s, nil
}
