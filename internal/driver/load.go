package driver

import (
	"os"
	"strings"
	"sync"

	"github.com/ulysses-go/ulysses/internal/dl"
)

// DefaultLibrary is the soname Load opens unless EnvLibrary overrides it.
const DefaultLibrary = "libcuda.so.1"

// EnvLibrary is the environment variable that, when set and non-empty,
// names the library Load opens instead of DefaultLibrary: a path (or
// soname) for a driver installed where the dynamic loader does not look,
// or for a stub driver in tests (see internal/fakecuda).
const EnvLibrary = "ULYSSES_LIBCUDA"

// Driver is a loaded and initialised CUDA driver library. It is safe for
// concurrent use.
type Driver struct {
	path  string
	lib   dl.Library
	fn    funcs
	calls sync.Pool // of *callBuf, see call.go

	// ipcOpen calls fn.ipcOpenMemHandle, or ipcOpenErr says why it cannot.
	ipcOpen    ipcOpenFunc
	ipcOpenErr error
}

var (
	loadOnce sync.Once
	loaded   *Driver
	loadErr  error
)

// Load opens the CUDA driver library, binds its symbols and calls
// cuInit(0), once per process; later calls return the same *Driver or the
// same error. The library is the one named by the environment variable
// ULYSSES_LIBCUDA (EnvLibrary) when it is set and non-empty, read at the
// first call, else libcuda.so.1 (DefaultLibrary) found by the dynamic
// loader. The override is for tests (a stub driver) and for drivers
// installed in unusual places.
func Load() (*Driver, error) {
	loadOnce.Do(func() { loaded, loadErr = LoadLibrary(libraryPath()) })
	return loaded, loadErr
}

// libraryPath is the library Load opens: $ULYSSES_LIBCUDA if non-empty,
// else DefaultLibrary.
func libraryPath() string {
	if p := os.Getenv(EnvLibrary); p != "" {
		return p
	}
	return DefaultLibrary
}

// LoadLibrary is Load for an explicit library path, without caching: each
// call dlopens path again (cheap after the first) and calls cuInit(0).
func LoadLibrary(path string) (*Driver, error) {
	lib, err := dl.Open(path)
	if err != nil {
		return nil, &LoadError{Path: path, Err: err}
	}
	d := &Driver{path: path, lib: lib}
	if err := d.fn.bind(path, lib.Sym); err != nil {
		lib.Close()
		return nil, err
	}
	d.ipcOpen, d.ipcOpenErr = bindIpcOpen(d.fn.ipcOpenMemHandle)
	r := d.call(d.fn.init, 0)
	if err := d.check("cuInit", r); err != nil {
		// libcuda is not closed here: a failed cuInit may leave threads behind.
		return nil, err
	}
	return d, nil
}

// Path returns the library path the driver was loaded from.
func (d *Driver) Path() string { return d.path }

// LoadError is a driver library the dynamic loader could not open. Its
// text is the loader's own words (which name the file) and what to do;
// errors.Is matches ErrNoDriver and the loader's error.
type LoadError struct {
	Path string // the library asked for: a soname or a path
	Err  error  // the dynamic loader's error
}

// Error formats as "driver: ", the loader's words (prefixed with Path
// where they do not name it) and the remedy.
func (e *LoadError) Error() string {
	words := e.Err.Error()
	if !strings.Contains(words, e.Path) {
		words = e.Path + ": " + words
	}
	return "driver: " + words + " (install the NVIDIA driver; the CUDA toolkit is not needed)"
}

// Unwrap returns ErrNoDriver and the loader's error, the last innermost.
func (e *LoadError) Unwrap() []error { return []error{ErrNoDriver, e.Err} }
