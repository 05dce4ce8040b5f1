package fakenccl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/fakenccl"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// TestFreshStubReadsZero: a stub this process has not used reports no
// init and no calls.
func TestFreshStubReadsZero(t *testing.T) {
	path := testutil.FakeNCCL(t)
	in, err := fakenccl.LastInit(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Init{World: -1, Rank: -1, Blocking: -2}, in)
	c, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Counts{}, c)
}

func TestReadNotTheStub(t *testing.T) {
	_, err := fakenccl.ReadCounts(testutil.FakeCUDA(t))
	require.ErrorContains(t, err, "is not the stub")
}
