package driver

import (
	"errors"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Module is a CUmodule, a loaded PTX or cubin image.
type Module uintptr

// Function is a CUfunction, a kernel of a Module.
type Function uintptr

// CUjit_option values LoadModule passes.
const (
	jitInfoLogBuffer       = 3
	jitInfoLogBufferBytes  = 4
	jitErrorLogBuffer      = 5
	jitErrorLogBufferBytes = 6
	jitLogBytes            = 8 << 10
)

// LoadModule loads a PTX, cubin or fatbin image into c (cuModuleLoadDataEx).
// PTX is JIT-compiled, which can take milliseconds to seconds. The image is
// copied with a terminating NUL when it lacks one. On failure the *Error's
// Log holds the JIT compiler's error log.
func (c *Context) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, errors.New("driver: LoadModule: empty image")
	}
	img := image
	if img[len(img)-1] != 0 {
		img = make([]byte, len(image)+1)
		copy(img, image)
	}
	infoLog := make([]byte, jitLogBytes)
	errLog := make([]byte, jitLogBytes)
	opts := [4]int32{jitInfoLogBuffer, jitInfoLogBufferBytes, jitErrorLogBuffer, jitErrorLogBufferBytes}
	// optionValues is a void*[]: buffers by address, sizes as integers cast
	// to pointer width. The buffers are kept alive below; the driver only
	// writes them during the call.
	vals := [4]uintptr{
		uintptr(unsafe.Pointer(&infoLog[0])), jitLogBytes,
		uintptr(unsafe.Pointer(&errLog[0])), jitLogBytes,
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var m Module
	r, _, _ := purego.SyscallN(c.d.fn.moduleLoadDataEx, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	c.leave()
	runtime.KeepAlive(img)
	runtime.KeepAlive(infoLog)
	runtime.KeepAlive(errLog)
	runtime.KeepAlive(&opts)
	runtime.KeepAlive(&vals)
	if code := resultOf(r); code != Success {
		e := c.d.newError("cuModuleLoadDataEx", code)
		e.Log = jitLog(errLog)
		if e.Log == "" {
			e.Log = jitLog(infoLog)
		}
		return 0, e
	}
	return m, nil
}

// jitLog returns a JIT log buffer as trimmed text without NULs.
func jitLog(b []byte) string {
	return strings.TrimSpace(strings.ReplaceAll(trimNUL(b), "\x00", ""))
}

// UnloadModule unloads a module from LoadModule (cuModuleUnload).
func (c *Context) UnloadModule(m Module) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.moduleUnload, uintptr(m))
	c.leave()
	return c.d.check("cuModuleUnload", r)
}

// Function looks a kernel up by its (mangled) name (cuModuleGetFunction);
// a missing name gives CUDA_ERROR_NOT_FOUND.
func (c *Context) Function(m Module, name string) (Function, error) {
	cname, ok := cString(name)
	if !ok {
		return 0, errors.New("driver: Function: name contains NUL")
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var f Function
	r, _, _ := purego.SyscallN(c.d.fn.moduleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0])))
	c.leave()
	runtime.KeepAlive(cname)
	if err := c.d.check("cuModuleGetFunction", r); err != nil {
		if e, ok := err.(*Error); ok {
			e.Description += ": " + name
		}
		return 0, err
	}
	return f, nil
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

// Function attributes this package names.
const (
	FuncAttrMaxThreadsPerBlock FuncAttribute = 0
	FuncAttrSharedSizeBytes    FuncAttribute = 1
	FuncAttrNumRegs            FuncAttribute = 4
	// FuncAttrSharedCarveout is the share of each SM's unified L1 and
	// shared memory that f prefers as shared memory, in percent (-1: no
	// preference). Blocks of kernels whose carveouts differ do not share
	// an SM, so a kernel meant to run beside others states one.
	FuncAttrSharedCarveout FuncAttribute = 9
)

// SetFuncAttribute sets one attribute of a loaded kernel
// (cuFuncSetAttribute).
func (c *Context) SetFuncAttribute(f Function, a FuncAttribute, v int) error {
	if c.d.fn.funcSetAttribute == 0 {
		return c.d.missing("cuFuncSetAttribute")
	}
	if err := c.enter(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(c.d.fn.funcSetAttribute, uintptr(f), uintptr(a), uintptr(int32(v)))
	c.leave()
	return c.d.check("cuFuncSetAttribute", r)
}

// FuncAttribute reads one attribute of a loaded kernel (cuFuncGetAttribute).
func (c *Context) FuncAttribute(f Function, a FuncAttribute) (int, error) {
	if c.d.fn.funcGetAttribute == 0 {
		return 0, c.d.missing("cuFuncGetAttribute")
	}
	var v int32
	r, _, _ := purego.SyscallN(c.d.fn.funcGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(f))
	return int(v), c.d.check("cuFuncGetAttribute", r)
}

// MaxActiveBlocks returns how many blocks of f with threads threads each
// (and no dynamic shared memory) one multiprocessor can hold at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (c *Context) MaxActiveBlocks(f Function, threads int) (int, error) {
	if c.d.fn.occupancyMaxActiveBlocks == 0 {
		return 0, c.d.missing("cuOccupancyMaxActiveBlocksPerMultiprocessor")
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var n int32
	r, _, _ := purego.SyscallN(c.d.fn.occupancyMaxActiveBlocks, uintptr(unsafe.Pointer(&n)), uintptr(f), uintptr(threads), 0)
	c.leave()
	return int(n), c.d.check("cuOccupancyMaxActiveBlocksPerMultiprocessor", r)
}
