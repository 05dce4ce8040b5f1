package ptx

// File describes one embedded PTX file (embedded as Name+".gz").
type File struct {
	Name      string  // the PTX file's name; the package holds Name+".gz"
	ElemBytes int     // element width it was compiled for
	Wire      bool    // the fp8 wire's entries (WireEntryFor), not the exact ones
	ISA       string  // PTX ISA version (.version): decides which drivers load it
	Target    string  // .target of the file
	ArgsBytes int     // size of the single by-value parameter of every entry
	SHA256    string  // of the PTX text: what its cubins record they were made from
	Entries   []Entry // entry points, in file order
}

// HasEntry reports whether f has an entry named e.
func (f File) HasEntry(e Entry) bool {
	for _, x := range f.Entries {
		if x == e {
			return true
		}
	}
	return false
}

// Widths lists the vector widths f has entries for, widest first.
func (f File) Widths() []int {
	var w []int
	for _, v := range vectorWidths {
		if v >= f.ElemBytes && f.HasEntry(EntryFor(OpSendRecvHeads, v)) {
			w = append(w, v)
		}
	}
	return w
}
