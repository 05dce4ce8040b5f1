package nccl

import "github.com/ulysses-go/ulysses/internal/dl"

// funcs holds the addresses of the NCCL entry points the binding calls.
type funcs struct {
	getVersion, getErrorString, getLastError, getUniqueID uintptr
	commInitRankConfig, commGetAsyncError, commAbort      uintptr
	commDestroy, groupStart, groupEnd                     uintptr
	send, recv, allGather                                 uintptr
}

// table lists every symbol the binding binds, all required.
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
	}
}
