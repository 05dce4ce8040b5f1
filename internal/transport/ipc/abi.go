package ipc

import (
	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

// The kernels' argument and the structures they share with the host, as
// kernelabi generates them from their one description.
type (
	kernelArgs = kernelabi.Args
	liveTable  = kernelabi.Live
	statusWord = kernelabi.Status
)

// Status codes the kernels write into statusWord.Code.
const (
	statusOK         = kernelabi.StatusOK
	statusTimeout    = kernelabi.StatusTimeout
	statusPeerClosed = kernelabi.StatusPeerClosed
	statusMismatch   = kernelabi.StatusMismatch
	statusAborted    = kernelabi.StatusAborted    // a wait ended by the abort word (Close during a blocked Sync)
	statusHalfReused = kernelabi.StatusHalfReused // two operations in a row on one data half (a graph's halves out of turn)
)
