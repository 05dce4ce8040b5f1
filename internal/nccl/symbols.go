package nccl

import "github.com/ulysses-go/ulysses/internal/dl"

// funcs holds the addresses of the NCCL entry points the binding calls;
// those of optional features are zero where the library lacks them.
type funcs struct {
	getVersion, getErrorString, getLastError, getUniqueID uintptr
	commInitRankConfig, commGetAsyncError, commAbort      uintptr
	commDestroy, groupStart, groupEnd                     uintptr
	send, recv, allGather                                 uintptr

	memAlloc, memFree                        uintptr // 2.19
	commWindowRegister, commWindowDeregister uintptr // 2.27
	alltoAll                                 uintptr // 2.28
	commSplit                                uintptr // 2.18
}

// table lists every symbol the binding binds: those of MinVersion
// required, those of the optional features (features.go) optional.
func (f *funcs) table() []dl.Symbol {
	return []dl.Symbol{
		dl.Req(&f.getVersion, "ncclGetVersion"),
		dl.Req(&f.getErrorString, "ncclGetErrorString"),
		dl.Req(&f.getLastError, "ncclGetLastError"),
		dl.Req(&f.getUniqueID, "ncclGetUniqueId"),
		dl.Req(&f.commInitRankConfig, "ncclCommInitRankConfig"),
		dl.Req(&f.commGetAsyncError, "ncclCommGetAsyncError"),
		dl.Req(&f.commAbort, "ncclCommAbort"),
		dl.Req(&f.commDestroy, "ncclCommDestroy"),
		dl.Req(&f.groupStart, "ncclGroupStart"),
		dl.Req(&f.groupEnd, "ncclGroupEnd"),
		dl.Req(&f.send, "ncclSend"),
		dl.Req(&f.recv, "ncclRecv"),
		dl.Req(&f.allGather, "ncclAllGather"),
		dl.Opt(&f.memAlloc, "ncclMemAlloc"),
		dl.Opt(&f.memFree, "ncclMemFree"),
		dl.Opt(&f.commWindowRegister, "ncclCommWindowRegister"),
		dl.Opt(&f.commWindowDeregister, "ncclCommWindowDeregister"),
		dl.Opt(&f.alltoAll, "ncclAlltoAll"),
		dl.Opt(&f.commSplit, "ncclCommSplit"),
	}
}
