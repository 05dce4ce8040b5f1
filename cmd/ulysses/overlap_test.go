package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// The burner on the stub driver: it loads burn.ptx, finds the entry,
// launches one block per SM on its own stream with its two parameters,
// times with its events, and releases all it made.
func TestBurnerOnFakeDriver(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	drv, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	t.Setenv(fakecuda.EnvRecordParams, "2")
	b, err := openBurner(drv, 0, 7)
	require.NoError(t, err)
	_, err = b.run(1234)
	require.NoError(t, err)
	calls, err := fakecuda.ReadCalls(lib)
	require.NoError(t, err)
	assert.Equal(t, [3]uint32{7, 1, 1}, calls.Launch.Grid)
	assert.Equal(t, [3]uint32{burnThreads, 1, 1}, calls.Launch.Block)
	assert.Equal(t, uint64(b.out), calls.Launch.Args[0], "out")
	assert.Equal(t, uint64(1234), calls.Launch.Args[1]&0xffffffff, "iters")
	assert.Equal(t, uint64(b.timed.stream), uint64(calls.Launch.Stream))
	require.NoError(t, b.close())
	assert.Empty(t, b.undo)
}
