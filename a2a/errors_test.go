package a2a

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// Every error the package returns names the package once, at the start,
// and still matches its sentinel.
func TestErrorsReadOnce(t *testing.T) {
	bad := goodConfig()
	bad.WorldSize = 9
	broken := &Comm{} // no transport: nothing reported by a device
	broken.failure = &TimeoutError{Rank: 0, Peer: 1, Phase: PhaseEnd, Epoch: 3}
	broken.reported = true
	_, handleErr := handle.Decode(make([]byte, 3))
	x, err := Tensor{Ptr: 0x100, Shape: [4]int{1, 3, 4, 8}, DType: BFloat16}.input(BFloat16)
	require.NoError(t, err)
	env := plan.Env{DType: api.BFloat16, World: 2, Layout: plan.NewLayout(1<<20, 2), Buf: 1 << 40, Widths: []int{16}}
	_, planErr := plan.Make(plan.Request{Op: ptx.OpSendRecvHeads, N: 1, Xs: [plan.MaxTensors]plan.Input{x}}, env, plan.NewTokens([]int{2, 2}), 0)
	_, dtypeErr := Tensor{Ptr: 0x100, Shape: [4]int{1, 3, 4, 8}, DType: Float16}.input(BFloat16)
	cases := []struct {
		err      error
		sentinel error
	}{
		{bad.validate(), ErrConfig},
		{handleErr, ErrHandle},
		{api.Wrap(handleErr, "handle %d", 1), ErrHandle},
		{planErr, ErrTokens},
		{dtypeErr, ErrDType},
		{broken.usable(true), ErrBroken},
		{broken.usable(true), ErrTimeout},
		{api.Prefixed(ErrClosed), ErrClosed},
		{api.Wrap(&PeerClosedError{Peer: 1}, "reading a view"), ErrPeerClosed},
		{api.WrapNCCL("the NCCL communicator failed", &nccl.Error{Call: "ncclCommGetAsyncError", Code: nccl.RemoteError, Text: "remote process exited or there was a network error"}), ErrNCCL},
		{api.WrapNCCL("loading NCCL", fmt.Errorf("dlopen: %w", nccl.ErrNoNCCL)), ErrNoNCCL},
	}
	for _, c := range cases {
		require.Error(t, c.err)
		msg := c.err.Error()
		assert.True(t, strings.HasPrefix(msg, "a2a: "), "%q", msg)
		assert.Equal(t, 1, strings.Count(msg, "a2a:"), "%q names the package more than once", msg)
		assert.True(t, errors.Is(c.err, c.sentinel), "%q does not match %v", msg, c.sentinel)
	}
	var te *TimeoutError
	assert.True(t, errors.As(broken.usable(true), &te), "a broken Comm's error wraps the first failure")
}
