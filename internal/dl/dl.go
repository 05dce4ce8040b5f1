// Package dl opens vendor libraries at run time and binds their entry
// points by name (purego's dlopen and dlsym), for the packages that wrap
// one: internal/driver (libcuda) and internal/nccl (libnccl). It knows
// nothing of either.
package dl

// Library is an open shared library.
type Library struct{ h uintptr }

// Open opens the shared library at path (or a soname the dynamic loader
// finds) with RTLD_NOW|RTLD_GLOBAL. The error carries the loader's text.
func Open(path string) (Library, error) {
	h, err := open(path)
	return Library{h}, err
}

// Sym returns the address of the entry point name, or an error.
func (l Library) Sym(name string) (uintptr, error) { return sym(l.h, name) }

// Close drops the reference Open took.
func (l Library) Close() { closeLib(l.h) }

// Symbol is one entry point to bind: the first of Names the library
// exports goes into *Addr. A missing required symbol fails Bind; a
// missing optional one leaves *Addr zero.
type Symbol struct {
	Names    []string
	Addr     *uintptr
	Optional bool
	Bound    *string // if set, receives the name that was bound
}

// Req is a required Symbol, Opt an optional one.
func Req(addr *uintptr, names ...string) Symbol { return Symbol{Names: names, Addr: addr} }

// Opt is an optional Symbol: see Req.
func Opt(addr *uintptr, names ...string) Symbol {
	return Symbol{Names: names, Addr: addr, Optional: true}
}

// Named records the bound name of a symbol with several names in *dst.
func (s Symbol) Named(dst *string) Symbol {
	s.Bound = dst
	return s
}

// Bind looks every symbol of table up with lookup, in order, and returns
// the first name of the first required symbol that none of its names
// resolves, or "" when all are bound.
func Bind(table []Symbol, lookup func(name string) (uintptr, error)) (missing string) {
	for _, s := range table {
		for _, n := range s.Names {
			if p, err := lookup(n); err == nil && p != 0 {
				*s.Addr = p
				if s.Bound != nil {
					*s.Bound = n
				}
				break
			}
		}
		if *s.Addr == 0 && !s.Optional {
			return s.Names[0]
		}
	}
	return ""
}
