package ptx

import (
	"os"
	"strconv"
	"strings"
)

// Cubin describes one embedded machine-code image: a PTX file assembled by
// the ptxas of NVCCVersion for one GPU architecture, loaded by the driver
// without compiling anything.
type Cubin struct {
	Name      string // the compressed file in this package
	Arch      string // the GPU architecture it runs on, e.g. "sm_90"
	PTX       string // the File it was made from
	PTXSHA256 string // that file's SHA256 when it was made: a stale cubin records another
	SHA256    string // of the cubin itself
	Bytes     int    // its size, uncompressed
}

// Cubins describes every embedded cubin.
func Cubins() []Cubin {
	return append([]Cubin(nil), cubins...)
}

// MachineCode returns f's cubin for a GPU of compute capability
// major.minor: one for the same major version and a minor version no
// newer than minor (a cubin for X.y runs on X.z for z >= y), the newest
// such; false where there is none and the driver must compile the PTX.
func (f File) MachineCode(major, minor int) (Cubin, bool) {
	var best Cubin
	bestMinor := -1
	for _, c := range cubins {
		if c.PTX != f.Name {
			continue
		}
		ma, mi, ok := archVersion(c.Arch)
		if ok && ma == major && mi <= minor && mi > bestMinor {
			best, bestMinor = c, mi
		}
	}
	return best, bestMinor >= 0
}

// archVersion reads "sm_86" as 8, 6.
func archVersion(arch string) (major, minor int, ok bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(arch, "sm_"))
	if err != nil || !strings.HasPrefix(arch, "sm_") || n < 10 {
		return 0, 0, false
	}
	return n / 10, n % 10, true
}

// Image returns the cubin, decompressed on the first call in the process
// (about 1 to 3 MB). The bytes are shared: callers must not modify them.
func (c Cubin) Image() ([]byte, error) { return decompressed(c.Name) }

// EnvPTXOnly names the environment variable that, set to anything but ""
// or "0", makes every GPU take the PTX, JIT-compiled by the driver, even
// where a cubin would run: for testing the path other GPUs take. It is
// read when the process's first Comm on a device arrives.
const EnvPTXOnly = "ULYSSES_PTX_ONLY"

// PTXOnly reports whether EnvPTXOnly asks for PTX only.
func PTXOnly() bool {
	v := os.Getenv(EnvPTXOnly)
	return v != "" && v != "0"
}
