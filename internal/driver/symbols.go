package driver

// funcs holds the addresses of the driver entry points this package calls.
// A zero address means an optional symbol the driver does not export.
type funcs struct {
	init, driverGetVersion, getErrorName, getErrorString                         uintptr
	deviceGet, deviceGetCount, deviceGetName, deviceGetAttribute, deviceTotalMem uintptr
	deviceGetPCIBusID, deviceCanAccessPeer, deviceGetUUID                        uintptr
	primaryCtxRetain, primaryCtxRelease                                          uintptr
	ctxSetCurrent, ctxGetCurrent, ctxSynchronize, ctxEnablePeerAccess            uintptr
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

	// The names bound where a symbol has several, for error messages.
	eventElapsedTimeName, deviceGetUUIDName string
}

// symbol is one entry point to bind: the first of names the library
// exports is used. A missing required symbol fails the load; a missing
// optional one leaves the address zero.
type symbol struct {
	names    []string
	addr     *uintptr
	optional bool
	bound    *string // if set, receives the name that was bound
}

// named records the bound name of a symbol with several names in *dst.
func (s symbol) named(dst *string) symbol {
	s.bound = dst
	return s
}

// req and opt build the table rows.
func req(addr *uintptr, names ...string) symbol { return symbol{names: names, addr: addr} }
func opt(addr *uintptr, names ...string) symbol {
	return symbol{names: names, addr: addr, optional: true}
}

// table lists every symbol the package binds, pointing into f.
func (f *funcs) table() []symbol {
	return []symbol{
		req(&f.init, "cuInit"),
		req(&f.driverGetVersion, "cuDriverGetVersion"),
		req(&f.getErrorName, "cuGetErrorName"),
		req(&f.getErrorString, "cuGetErrorString"),
		req(&f.deviceGet, "cuDeviceGet"),
		req(&f.deviceGetCount, "cuDeviceGetCount"),
		req(&f.deviceGetName, "cuDeviceGetName"),
		req(&f.deviceGetAttribute, "cuDeviceGetAttribute"),
		req(&f.deviceTotalMem, "cuDeviceTotalMem_v2"),
		req(&f.deviceGetPCIBusID, "cuDeviceGetPCIBusId"),
		req(&f.deviceCanAccessPeer, "cuDeviceCanAccessPeer"),
		opt(&f.deviceGetUUID, "cuDeviceGetUuid_v2", "cuDeviceGetUuid").named(&f.deviceGetUUIDName),
		req(&f.primaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		req(&f.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		req(&f.ctxSetCurrent, "cuCtxSetCurrent"),
		opt(&f.ctxGetCurrent, "cuCtxGetCurrent"),   // tests and probes only
		opt(&f.ctxSynchronize, "cuCtxSynchronize"), // tests and probes only
		req(&f.ctxEnablePeerAccess, "cuCtxEnablePeerAccess"),
		opt(&f.memGetInfo, "cuMemGetInfo_v2"), // tests and probes only
		req(&f.memAlloc, "cuMemAlloc_v2"),
		req(&f.memFree, "cuMemFree_v2"),
		opt(&f.memsetD32, "cuMemsetD32_v2"), // tests and probes only
		req(&f.memsetD32Async, "cuMemsetD32Async"),
		req(&f.memsetD8Async, "cuMemsetD8Async"),
		opt(&f.memcpyHtoD, "cuMemcpyHtoD_v2"), // tests and probes only
		opt(&f.memcpyDtoH, "cuMemcpyDtoH_v2"), // tests and probes only
		req(&f.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		req(&f.memcpy2DAsync, "cuMemcpy2DAsync_v2"),
		req(&f.memcpy3DAsync, "cuMemcpy3DAsync_v2"),
		req(&f.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		req(&f.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		req(&f.memcpyPeerAsync, "cuMemcpyPeerAsync"),
		req(&f.memHostAlloc, "cuMemHostAlloc"),
		req(&f.memFreeHost, "cuMemFreeHost"),
		req(&f.memHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
		req(&f.ipcGetMemHandle, "cuIpcGetMemHandle"),
		req(&f.ipcOpenMemHandle, "cuIpcOpenMemHandle_v2"),
		req(&f.ipcCloseMemHandle, "cuIpcCloseMemHandle"),
		req(&f.moduleLoadDataEx, "cuModuleLoadDataEx"),
		req(&f.moduleUnload, "cuModuleUnload"),
		req(&f.moduleGetFunction, "cuModuleGetFunction"),
		req(&f.launchKernel, "cuLaunchKernel"),
		req(&f.streamCreate, "cuStreamCreate"),
		req(&f.streamDestroy, "cuStreamDestroy_v2"),
		req(&f.streamSynchronize, "cuStreamSynchronize"),
		req(&f.streamQuery, "cuStreamQuery"),
		req(&f.streamWaitEvent, "cuStreamWaitEvent"),
		req(&f.streamGetCtx, "cuStreamGetCtx"),
		req(&f.eventCreate, "cuEventCreate"),
		req(&f.eventRecord, "cuEventRecord"),
		req(&f.eventSynchronize, "cuEventSynchronize"),
		req(&f.eventQuery, "cuEventQuery"),
		// The _v2 is preferred; either one satisfies the load.
		req(&f.eventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime").named(&f.eventElapsedTimeName),
		req(&f.eventDestroy, "cuEventDestroy_v2"),
		req(&f.memGetAddressRange, "cuMemGetAddressRange_v2"),
		opt(&f.funcGetAttribute, "cuFuncGetAttribute"),
		opt(&f.funcSetAttribute, "cuFuncSetAttribute"),
		// CUDA graphs (a2a's capture): optional, checked when used.
		opt(&f.streamBeginCapture, "cuStreamBeginCapture_v2"),
		opt(&f.streamEndCapture, "cuStreamEndCapture"),
		opt(&f.streamIsCapturing, "cuStreamIsCapturing"),
		opt(&f.graphInstantiate, "cuGraphInstantiateWithFlags"),
		opt(&f.graphLaunch, "cuGraphLaunch"),
		opt(&f.graphExecDestroy, "cuGraphExecDestroy"),
		opt(&f.graphDestroy, "cuGraphDestroy"),
		opt(&f.occupancyMaxActiveBlocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
	}
}

// bind resolves every symbol of f through lookup.
func (f *funcs) bind(lib string, lookup func(name string) (uintptr, error)) error {
	for _, s := range f.table() {
		for _, n := range s.names {
			if p, err := lookup(n); err == nil && p != 0 {
				*s.addr = p
				if s.bound != nil {
					*s.bound = n
				}
				break
			}
		}
		if *s.addr == 0 && !s.optional {
			return &symbolError{lib: lib, name: s.names[0]}
		}
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
