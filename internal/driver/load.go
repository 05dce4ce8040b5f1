package driver

import (
	"fmt"
	"sync"
)

// DefaultLibrary is the soname Load opens.
const DefaultLibrary = "libcuda.so.1"

// Driver is a loaded and initialised CUDA driver library. It is safe for
// concurrent use.
type Driver struct {
	path   string
	handle uintptr
	fn     funcs
	calls  sync.Pool // of *callBuf, see call.go
}

var (
	loadOnce sync.Once
	loaded   *Driver
	loadErr  error
)

// Load opens libcuda.so.1, binds its symbols and calls cuInit(0), once per
// process; later calls return the same *Driver or the same error.
func Load() (*Driver, error) {
	loadOnce.Do(func() { loaded, loadErr = LoadLibrary(DefaultLibrary) })
	return loaded, loadErr
}

// LoadLibrary is Load for an explicit library path, without caching: each
// call dlopens path again (cheap after the first) and calls cuInit(0).
func LoadLibrary(path string) (*Driver, error) {
	h, err := dlopen(path)
	if err != nil {
		return nil, fmt.Errorf("driver: cannot load %s (install the NVIDIA driver; CUDA toolkit not needed): %v: %w",
			path, err, ErrNoDriver)
	}
	d := &Driver{path: path, handle: h}
	if err := d.fn.bind(path, func(name string) (uintptr, error) { return dlsym(h, name) }); err != nil {
		dlclose(h)
		return nil, err
	}
	r := d.call(d.fn.init, 0)
	if err := d.check("cuInit", r); err != nil {
		// libcuda is not closed here: a failed cuInit may leave threads behind.
		return nil, err
	}
	return d, nil
}

// Path returns the library path the driver was loaded from.
func (d *Driver) Path() string { return d.path }
