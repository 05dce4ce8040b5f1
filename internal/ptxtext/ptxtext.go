// Package ptxtext splits a PTX file as nvcc writes the kernels' into its
// header and its entries, so that a subset of the entries can be handed to
// the driver as a PTX module of its own: the header (comments, .version,
// .target, .address_size) followed by the entries' text.
//
// That is sound only while nothing at the top level is shared between
// entries: no .func, .global, .const, .extern or other directive besides
// the header's and the entries. Split refuses any other top-level line,
// so a file that would need more than text slicing fails here (in the
// generator and the tests), not in the driver.
package ptxtext

import (
	"bytes"
	"errors"
	"fmt"
)

// Span is one entry of a PTX text: its name and where its definition
// (from ".visible .entry" to its closing "}" line, newline included) lies.
type Span struct {
	Name       string
	Start, End int // byte offsets into the text
}

// File is a split PTX text.
type File struct {
	HeaderEnd int    // the header is text[:HeaderEnd]: up to the .address_size line, newline included
	Entries   []Span // in file order
}

// ErrLayout is returned for text whose top level holds more than a header,
// comments and entries.
var ErrLayout = errors.New("ptxtext: PTX layout not understood")

const entryPrefix = ".visible .entry "

// Split parses text. It reads only the top level: an entry runs from its
// ".visible .entry NAME(" line to the first line that is exactly "}".
func Split(text []byte) (File, error) {
	var f File
	lines := 0
	for off := 0; off < len(text); lines++ {
		line, next := text[off:], len(text)
		if n := bytes.IndexByte(line, '\n'); n >= 0 {
			line, next = line[:n], off+n+1
		}
		switch {
		case f.HeaderEnd == 0 && bytes.HasPrefix(line, []byte(".address_size ")):
			f.HeaderEnd = next
		case f.HeaderEnd == 0:
			// the header: comments, blank lines, .version, .target
		case bytes.HasPrefix(line, []byte(entryPrefix)):
			s, err := entry(text, off, line)
			if err != nil {
				return File{}, err
			}
			f.Entries = append(f.Entries, s)
			next = s.End
		case isFiller(line):
		default:
			return File{}, fmt.Errorf("%w: line %d at the top level: %.60q", ErrLayout, lines+1, line)
		}
		off = next
	}
	if f.HeaderEnd == 0 || len(f.Entries) == 0 {
		return File{}, fmt.Errorf("%w: no .address_size line or no entries", ErrLayout)
	}
	return f, nil
}

// entry reads the entry whose first line, line, starts at off.
func entry(text []byte, off int, line []byte) (Span, error) {
	name, _, ok := bytes.Cut(line[len(entryPrefix):], []byte("("))
	if !ok || len(name) == 0 {
		return Span{}, fmt.Errorf("%w: entry line %.60q", ErrLayout, line)
	}
	closing := bytes.Index(text[off:], []byte("\n}\n"))
	if closing < 0 {
		return Span{}, fmt.Errorf("%w: entry %s has no closing line", ErrLayout, name)
	}
	end := off + closing + len("\n}\n")
	if bytes.Contains(text[off+len(line):end], []byte("\n"+entryPrefix)) {
		return Span{}, fmt.Errorf("%w: entry %s runs into the next", ErrLayout, name)
	}
	return Span{Name: string(name), Start: off, End: end}, nil
}

// isFiller reports whether a top-level line carries nothing: blank, or a
// comment.
func isFiller(line []byte) bool {
	t := bytes.TrimLeft(line, " \t\r")
	return len(t) == 0 || bytes.HasPrefix(t, []byte("//"))
}

// Image returns the header of text followed by the entries of f at the
// indices idx, in that order, and a NUL: a PTX module of its own.
func (f File) Image(text []byte, idx []int) []byte {
	n := f.HeaderEnd + 2
	for _, i := range idx {
		n += f.Entries[i].End - f.Entries[i].Start + 1
	}
	b := make([]byte, 0, n)
	b = append(b, text[:f.HeaderEnd]...)
	for _, i := range idx {
		b = append(b, '\n')
		b = append(b, text[f.Entries[i].Start:f.Entries[i].End]...)
	}
	return append(b, '\n', 0)
}
