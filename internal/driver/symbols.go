package driver

import "github.com/ulysses-go/ulysses/internal/dl"

// funcs holds the addresses of the driver entry points this package calls.
// A zero address means an optional symbol the driver does not export.
type funcs struct {
	init, driverGetVersion, getErrorName, getErrorString                         uintptr
	deviceGet, deviceGetCount, deviceGetName, deviceGetAttribute, deviceTotalMem uintptr
	deviceGetPCIBusID, deviceCanAccessPeer, deviceGetUUID                        uintptr
	primaryCtxRetain, primaryCtxRelease                                          uintptr
	ctxSetCurrent, ctxGetCurrent, ctxSynchronize, ctxEnablePeerAccess            uintptr
	ctxPushCurrent, ctxPopCurrent                                                uintptr
	memGetInfo, memAlloc, memFree, memsetD32, memsetD32Async, memsetD8Async      uintptr
	memcpyHtoD, memcpyDtoH, memcpyDtoDAsync, memcpyHtoDAsync, memcpyDtoHAsync    uintptr
	memcpy2DAsync, memcpy3DAsync                                                 uintptr
	memcpyPeerAsync, memHostAlloc, memFreeHost, memHostGetDevicePointer          uintptr
	ipcGetMemHandle, ipcOpenMemHandle, ipcCloseMemHandle                         uintptr
	moduleLoadDataEx, moduleUnload, moduleGetFunction, launchKernel              uintptr
	streamCreate, streamDestroy, streamSynchronize, streamQuery, streamWaitEvent uintptr
	eventCreate, eventRecord, eventSynchronize, eventElapsedTime, eventDestroy   uintptr
	eventQuery, streamGetCtx                                                     uintptr
	streamBeginCapture, streamEndCapture, streamIsCapturing, graphInstantiate    uintptr
	graphLaunch, graphExecDestroy, graphDestroy                                  uintptr
	funcGetAttribute, occupancyMaxActiveBlocks, memGetAddressRange               uintptr
	funcSetAttribute                                                             uintptr
	vmm                                                                          vmmFuncs

	// The names bound where a symbol has several, for error messages.
	eventElapsedTimeName, deviceGetUUIDName string
}

// table lists every symbol the package binds, pointing into f.
func (f *funcs) table() []dl.Symbol {
	return append([]dl.Symbol{
		dl.Req(&f.init, "cuInit"),
		dl.Req(&f.driverGetVersion, "cuDriverGetVersion"),
		dl.Req(&f.getErrorName, "cuGetErrorName"),
		dl.Req(&f.getErrorString, "cuGetErrorString"),
		dl.Req(&f.deviceGet, "cuDeviceGet"),
		dl.Req(&f.deviceGetCount, "cuDeviceGetCount"),
		dl.Req(&f.deviceGetName, "cuDeviceGetName"),
		dl.Req(&f.deviceGetAttribute, "cuDeviceGetAttribute"),
		dl.Req(&f.deviceTotalMem, "cuDeviceTotalMem_v2"),
		dl.Req(&f.deviceGetPCIBusID, "cuDeviceGetPCIBusId"),
		dl.Req(&f.deviceCanAccessPeer, "cuDeviceCanAccessPeer"),
		dl.Opt(&f.deviceGetUUID, "cuDeviceGetUuid_v2", "cuDeviceGetUuid").Named(&f.deviceGetUUIDName),
		dl.Req(&f.primaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		dl.Req(&f.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		dl.Opt(&f.ctxSetCurrent, "cuCtxSetCurrent"), // tests only: calls push and pop
		dl.Req(&f.ctxPushCurrent, "cuCtxPushCurrent_v2"),
		dl.Req(&f.ctxPopCurrent, "cuCtxPopCurrent_v2"),
		dl.Opt(&f.ctxGetCurrent, "cuCtxGetCurrent"),   // tests and probes only
		dl.Opt(&f.ctxSynchronize, "cuCtxSynchronize"), // tests and probes only
		dl.Req(&f.ctxEnablePeerAccess, "cuCtxEnablePeerAccess"),
		dl.Opt(&f.memGetInfo, "cuMemGetInfo_v2"), // tests and probes only
		dl.Req(&f.memAlloc, "cuMemAlloc_v2"),
		dl.Req(&f.memFree, "cuMemFree_v2"),
		dl.Opt(&f.memsetD32, "cuMemsetD32_v2"), // tests and probes only
		dl.Req(&f.memsetD32Async, "cuMemsetD32Async"),
		dl.Req(&f.memsetD8Async, "cuMemsetD8Async"),
		dl.Opt(&f.memcpyHtoD, "cuMemcpyHtoD_v2"), // tests and probes only
		dl.Opt(&f.memcpyDtoH, "cuMemcpyDtoH_v2"), // tests and probes only
		dl.Req(&f.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		dl.Req(&f.memcpy2DAsync, "cuMemcpy2DAsync_v2"),
		dl.Req(&f.memcpy3DAsync, "cuMemcpy3DAsync_v2"),
		dl.Req(&f.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		dl.Req(&f.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		dl.Req(&f.memcpyPeerAsync, "cuMemcpyPeerAsync"),
		dl.Req(&f.memHostAlloc, "cuMemHostAlloc"),
		dl.Req(&f.memFreeHost, "cuMemFreeHost"),
		dl.Req(&f.memHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
		dl.Req(&f.ipcGetMemHandle, "cuIpcGetMemHandle"),
		dl.Req(&f.ipcOpenMemHandle, "cuIpcOpenMemHandle_v2"),
		dl.Req(&f.ipcCloseMemHandle, "cuIpcCloseMemHandle"),
		dl.Req(&f.moduleLoadDataEx, "cuModuleLoadDataEx"),
		dl.Req(&f.moduleUnload, "cuModuleUnload"),
		dl.Req(&f.moduleGetFunction, "cuModuleGetFunction"),
		dl.Req(&f.launchKernel, "cuLaunchKernel"),
		dl.Req(&f.streamCreate, "cuStreamCreate"),
		dl.Req(&f.streamDestroy, "cuStreamDestroy_v2"),
		dl.Req(&f.streamSynchronize, "cuStreamSynchronize"),
		dl.Req(&f.streamQuery, "cuStreamQuery"),
		dl.Req(&f.streamWaitEvent, "cuStreamWaitEvent"),
		dl.Req(&f.streamGetCtx, "cuStreamGetCtx"),
		dl.Req(&f.eventCreate, "cuEventCreate"),
		dl.Req(&f.eventRecord, "cuEventRecord"),
		dl.Req(&f.eventSynchronize, "cuEventSynchronize"),
		dl.Req(&f.eventQuery, "cuEventQuery"),
		// The _v2 is preferred; either one satisfies the load.
		dl.Req(&f.eventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime").Named(&f.eventElapsedTimeName),
		dl.Req(&f.eventDestroy, "cuEventDestroy_v2"),
		dl.Req(&f.memGetAddressRange, "cuMemGetAddressRange_v2"),
		dl.Opt(&f.funcGetAttribute, "cuFuncGetAttribute"),
		dl.Opt(&f.funcSetAttribute, "cuFuncSetAttribute"),
		// CUDA graphs (a2a's capture): optional, checked when used.
		dl.Opt(&f.streamBeginCapture, "cuStreamBeginCapture_v2"),
		dl.Opt(&f.streamEndCapture, "cuStreamEndCapture"),
		dl.Opt(&f.streamIsCapturing, "cuStreamIsCapturing"),
		dl.Opt(&f.graphInstantiate, "cuGraphInstantiateWithFlags"),
		dl.Opt(&f.graphLaunch, "cuGraphLaunch"),
		dl.Opt(&f.graphExecDestroy, "cuGraphExecDestroy"),
		dl.Opt(&f.graphDestroy, "cuGraphDestroy"),
		dl.Opt(&f.occupancyMaxActiveBlocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
	}, f.vmm.table()...)
}

// bind binds every symbol of the table with lookup; the first missing
// required one is a *symbolError.
func (f *funcs) bind(lib string, lookup func(name string) (uintptr, error)) error {
	if name := dl.Bind(f.table(), lookup); name != "" {
		return &symbolError{lib: lib, name: name}
	}
	return nil
}

// symbolError reports a missing entry point; it matches ErrSymbolMissing.
type symbolError struct{ lib, name string }

func (e *symbolError) Error() string {
	return "driver: " + e.lib + " lacks " + e.name + " (update the NVIDIA driver): " + ErrSymbolMissing.Error()
}

func (e *symbolError) Unwrap() error { return ErrSymbolMissing }

// missing is the error a method returns when its optional symbol is absent.
func (d *Driver) missing(name string) error { return &symbolError{lib: d.path, name: name} }
