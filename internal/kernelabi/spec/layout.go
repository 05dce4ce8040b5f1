package spec

import (
	"fmt"
	"strings"
)

// Placed is a field at its offset, with its element count.
type Placed struct {
	Field
	Offset, Count int64
}

// Bytes is the field's size.
func (p Placed) Bytes() int64 { return p.Count * p.Type.Size }

// GoName is the field's Go name: the C name camel-cased (timeout_ns ->
// TimeoutNs).
func (f Field) GoName() string {
	var b strings.Builder
	for _, part := range strings.Split(f.C, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// Layout places s's fields with the natural alignment of their scalars,
// as nvcc and Go both do, and returns the struct's size.
func (s Struct) Layout() ([]Placed, int64) {
	var placed []Placed
	var off, align int64 = 0, 1
	for _, f := range s.Fields {
		sz := f.Type.Size
		off = (off + sz - 1) / sz * sz
		align = max(align, sz)
		count := int64(1)
		for _, d := range f.Dims {
			count *= d.value()
		}
		placed = append(placed, Placed{Field: f, Offset: off, Count: count})
		off += sz * count
	}
	return placed, (off + align - 1) / align * align
}

// value is the dimension's length.
func (d Dim) value() int64 {
	if d.Const == "" {
		return d.Add
	}
	return ConstNamed(d.Const).Value + d.Add
}

// ConstNamed is the constant of that C name; it panics for an unknown
// one (the description is this package's own).
func ConstNamed(c string) Const {
	for _, k := range Consts {
		if k.C == c {
			return k
		}
	}
	panic(fmt.Sprintf("spec: no constant %s", c))
}
