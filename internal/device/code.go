package device

import (
	"fmt"

	"github.com/ulysses-go/ulysses/ptx"
)

// Code says how one PTX file's kernels reach a device: as machine code
// (Arch, an embedded cubin the driver loads without compiling), or as PTX
// the driver JIT-compiles, for Reason.
type Code struct {
	File   string // the PTX file (ptx.File.Name)
	Arch   string // the cubin's architecture, e.g. "sm_90"; "" for PTX
	Reason string // why PTX, when Arch is ""
}

// chooseCode is the code f gets on a device of compute capability
// major.minor before anything is loaded, with the cubin to load: the
// machine code that runs there, unless ptx.EnvPTXOnly asks for PTX or
// there is none.
func chooseCode(f ptx.File, major, minor int) (Code, ptx.Cubin) {
	if ptx.PTXOnly() {
		return Code{File: f.Name, Reason: ptx.EnvPTXOnly + " is set"}, ptx.Cubin{}
	}
	c, ok := f.MachineCode(major, minor)
	if !ok {
		return Code{File: f.Name, Reason: fmt.Sprintf("no machine code for compute capability %d.%d", major, minor)}, ptx.Cubin{}
	}
	return Code{File: f.Name, Arch: c.Arch}, c
}

// WireRuns reports whether a device of compute capability major.minor
// runs the fp8 wire's kernels: 9.0 or later (their conversions).
func WireRuns(major, minor int) bool { return major*10+minor >= 90 }

// filesFor lists the PTX files a device of compute capability major.minor
// can load: the fp8 wire's only where WireRuns.
func filesFor(major, minor int) []ptx.File {
	var fs []ptx.File
	for _, f := range ptx.Files() {
		if !f.Wire || WireRuns(major, minor) {
			fs = append(fs, f)
		}
	}
	return fs
}

// Codes returns how the kernels reach device ordinal, of compute
// capability major.minor: as they did for the process's share there,
// where it has one (a cubin that failed to load has fallen back to PTX,
// for that reason), else as they would now. Files the device cannot load
// (the wire's below 9.0) are left out.
func Codes(ordinal, major, minor int) []Code {
	shares.mu.Lock()
	s := shares.m[ordinal]
	shares.mu.Unlock()
	if s != nil {
		return s.Codes()
	}
	var cs []Code
	for _, f := range filesFor(major, minor) {
		c, _ := chooseCode(f, major, minor)
		cs = append(cs, c)
	}
	return cs
}
