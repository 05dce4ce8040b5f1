package cuinterop

// The only file with cgo: what the driver says of pointers and streams.
// Each function makes one cgo call, its driver calls all on one thread.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// The attributes of p that pointerFacts reads, in one driver call. An
// address the driver does not know gets memType 0: cuPointerGetAttributes
// documents success with default values for it, and CUDA_ERROR_INVALID_VALUE
// is what a driver that refuses it instead says (as cuPointerGetAttribute).
typedef struct {
	CUcontext ctx;
	unsigned int memType;
	int device;
	CUdeviceptr base;
	size_t size;
} ucuPointer;

static CUresult ucuPointerAttributes(CUdeviceptr p, ucuPointer *out) {
	CUpointer_attribute attrs[5] = {
		CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	};
	void *data[5] = {&out->ctx, &out->memType, &out->device, &out->base, &out->size};
	CUresult r = cuPointerGetAttributes(5, attrs, data, p);
	if (r == CUDA_ERROR_INVALID_VALUE) {
		out->memType = 0;
		return CUDA_SUCCESS;
	}
	return r;
}

// ucuPrimary sets *primary to dev's primary context, or NULL when it is
// not active: retaining an inactive one would create it.
static CUresult ucuPrimary(CUdevice dev, CUcontext *primary, const char **call) {
	unsigned int flags;
	int active;
	*primary = NULL;
	*call = "cuDevicePrimaryCtxGetState";
	CUresult r = cuDevicePrimaryCtxGetState(dev, &flags, &active);
	if (r != CUDA_SUCCESS || !active) return r;
	*call = "cuDevicePrimaryCtxRetain";
	if ((r = cuDevicePrimaryCtxRetain(primary, dev)) != CUDA_SUCCESS) return r;
	*call = "cuDevicePrimaryCtxRelease";
	return cuDevicePrimaryCtxRelease(dev);
}

// ucuPointerFacts reads p's attributes and its device's primary context.
static CUresult ucuPointerFacts(CUdeviceptr p, ucuPointer *out, CUcontext *primary, const char **call) {
	*call = "cuPointerGetAttributes";
	*primary = NULL;
	CUresult r = ucuPointerAttributes(p, out);
	if (r != CUDA_SUCCESS || (out->memType != CU_MEMORYTYPE_DEVICE && out->memType != CU_MEMORYTYPE_UNIFIED)) return r;
	return ucuPrimary(out->device, primary, call);
}

// ucuStreamFacts reads s's context (for NULL, the thread's current one),
// its device (pushing it current for a moment) and that device's primary
// context.
static CUresult ucuStreamFacts(CUstream s, CUcontext *ctx, CUdevice *dev, CUcontext *primary, const char **call) {
	CUcontext popped;
	CUresult r, pop;
	*primary = NULL;
	*call = s ? "cuStreamGetCtx" : "cuCtxGetCurrent";
	r = s ? cuStreamGetCtx(s, ctx) : cuCtxGetCurrent(ctx);
	if (r != CUDA_SUCCESS || *ctx == NULL) return r;
	*call = "cuCtxPushCurrent";
	if ((r = cuCtxPushCurrent(*ctx)) != CUDA_SUCCESS) return r;
	r = cuCtxGetDevice(dev);
	pop = cuCtxPopCurrent(&popped);
	if (r != CUDA_SUCCESS) {
		*call = "cuCtxGetDevice";
		return r;
	}
	if (pop != CUDA_SUCCESS) {
		*call = "cuCtxPopCurrent";
		return pop;
	}
	return ucuPrimary(*dev, primary, call);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/cuinterop/internal/rule"
)

// pointerFacts asks the driver about ptr: five attributes in one
// cuPointerGetAttributes, then its device's primary context
// (cuDevicePrimaryCtxGetState, and when active a retain and a release).
func pointerFacts(ptr cu.DevicePtr) (rule.Pointer, error) {
	var p C.ucuPointer
	var primary C.CUcontext
	var call *C.char
	if r := C.ucuPointerFacts(C.CUdeviceptr(ptr), &p, &primary, &call); r != C.CUDA_SUCCESS {
		return rule.Pointer{}, driverError(call, r)
	}
	return rule.Pointer{
		Ptr:     uintptr(ptr),
		Type:    rule.MemType(p.memType),
		Ctx:     uintptr(unsafe.Pointer(p.ctx)),
		Device:  int(p.device),
		Base:    uintptr(p.base),
		Size:    int64(p.size),
		Primary: uintptr(unsafe.Pointer(primary)),
	}, nil
}

// streamFacts asks the driver about s: cuStreamGetCtx (cuCtxGetCurrent
// for cu.NoStream), the context's device (push, cuCtxGetDevice, pop) and
// that device's primary context (as pointerFacts).
func streamFacts(s cu.Stream) (rule.Stream, error) {
	cs := C.CUstream(unsafe.Pointer(s.C()))
	var ctx, primary C.CUcontext
	var dev C.CUdevice
	var call *C.char
	if r := C.ucuStreamFacts(cs, &ctx, &dev, &primary, &call); r != C.CUDA_SUCCESS {
		return rule.Stream{}, driverError(call, r)
	}
	return rule.Stream{
		Handle:  uintptr(unsafe.Pointer(cs)),
		Ctx:     uintptr(unsafe.Pointer(ctx)),
		Device:  int(dev),
		Primary: uintptr(unsafe.Pointer(primary)),
	}, nil
}

// driverError is call's failure r as an error matching ErrDriver.
func driverError(call *C.char, r C.CUresult) error {
	name := "CUresult"
	var s *C.char
	if C.cuGetErrorName(r, &s) == C.CUDA_SUCCESS && s != nil {
		name = C.GoString(s)
	}
	return fmt.Errorf("cuinterop: %s: %s (%d): %w", C.GoString(call), name, int(r), ErrDriver)
}
