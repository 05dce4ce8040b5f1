package nccl

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/ulysses-go/ulysses/internal/dl"
)

// DefaultLibrary is the soname Load opens unless EnvLibrary overrides it.
const DefaultLibrary = "libnccl.so.2"

// EnvLibrary names, when set and non-empty, the library Load opens
// instead of DefaultLibrary: NCCL installed where the dynamic loader does
// not look (a Python wheel's nvidia/nccl/lib, say), or the stub in tests.
const EnvLibrary = "ULYSSES_LIBNCCL"

// MinVersion is the oldest NCCL the binding accepts: 2.14, the first with
// a configurable (non-blocking) communicator.
const MinVersion = 21400

var (
	// ErrNoNCCL is matched when the NCCL library cannot be opened; the
	// error keeps the dynamic loader's text.
	ErrNoNCCL = errors.New("nccl: NCCL library not available")
	// ErrSymbolMissing is matched when the library lacks an entry point
	// the binding needs (an NCCL older than MinVersion, or not NCCL).
	ErrSymbolMissing = errors.New("nccl: the library lacks an entry point")
	// ErrNeedsBlocking is matched when a call that has NCCL write a
	// result after it returns on a non-blocking communicator is made on
	// one (WindowRegister: use a blocking communicator).
	ErrNeedsBlocking = errors.New("nccl: the call needs a blocking communicator")
)

// Library is a loaded NCCL. It is safe for concurrent use.
type Library struct {
	path    string
	lib     dl.Library
	fn      funcs
	init    initFunc
	version int

	errorString func(r int32) string      // ncclGetErrorString
	lastError   func(comm uintptr) string // ncclGetLastError
}

var (
	loadOnce sync.Once
	loaded   *Library
	loadErr  error
)

// Load opens NCCL once per process: $ULYSSES_LIBNCCL when set, else
// libnccl.so.2 where the dynamic loader finds it. Later calls return the
// same Library or error.
func Load() (*Library, error) {
	loadOnce.Do(func() {
		path := os.Getenv(EnvLibrary)
		if path == "" {
			path = DefaultLibrary
		}
		loaded, loadErr = LoadLibrary(path)
	})
	return loaded, loadErr
}

// LoadLibrary is Load for an explicit path, without caching.
func LoadLibrary(path string) (*Library, error) {
	lib, err := dl.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nccl: cannot load %s (install NCCL, or set %s to its path): %v: %w", path, EnvLibrary, err, ErrNoNCCL)
	}
	l := &Library{path: path, lib: lib}
	if name := dl.Bind(l.fn.table(), lib.Sym); name != "" {
		lib.Close()
		return nil, fmt.Errorf("nccl: %s lacks %s (NCCL %d.%d or newer is needed): %w", path, name, MinVersion/10000, MinVersion/100%100, ErrSymbolMissing)
	}
	purego.RegisterFunc(&l.errorString, l.fn.getErrorString)
	purego.RegisterFunc(&l.lastError, l.fn.getLastError)
	if l.init, err = bindInit(l.fn.commInitRankConfig); err != nil {
		lib.Close()
		return nil, err
	}
	var v int32
	if err := l.check("ncclGetVersion", 0, l.call(l.fn.getVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		lib.Close()
		return nil, err
	}
	if l.version = int(v); l.version < MinVersion {
		lib.Close()
		return nil, fmt.Errorf("nccl: %s is NCCL %s, %d.%d or newer is needed: %w", path, versionString(l.version), MinVersion/10000, MinVersion/100%100, ErrSymbolMissing)
	}
	return l, nil
}

// Path is the library's path as opened.
func (l *Library) Path() string { return l.path }

// Version is NCCL's version code (22809 for 2.28.9).
func (l *Library) Version() int { return l.version }

// versionString formats a version code as NCCL does: X*10000+Y*100+Z
// from 2.9 on, X*1000+Y*100+Z before.
func versionString(v int) string {
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

// call invokes fn with integer arguments and returns its result. Pointers
// converted to uintptr in the call's own argument list stay on the heap
// and alive until it returns (uintptrescapes).
//
//go:uintptrescapes
func (l *Library) call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

// check turns a result of call into nil or an *Error, with NCCL's last
// error message for comm (0: none).
func (l *Library) check(name string, comm uintptr, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: name, Code: r, Text: l.errorString(int32(r))}
	if r != InProgress {
		e.Detail = l.lastError(comm)
	}
	return e
}
