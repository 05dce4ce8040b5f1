//go:build linux

package fakecuda_test

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// TestVMMShares checks the stub's virtual memory calls: an allocation
// made, mapped and given access on device 0, exported as a descriptor and
// imported on device 1 maps the same memory there; legacy IPC and
// cuMemFree refuse it; and once everything is unmapped and released,
// nothing is left, descriptors included.
func TestVMMShares(t *testing.T) {
	fds := testutil.OpenFDs(t)
	lib, d, c := load(t)
	g, err := d.AllocationGranularity(0, driver.HandlePosixFD)
	require.NoError(t, err)
	require.Equal(t, uint64(2<<20), g)
	v, err := d.DeviceAttribute(0, driver.AttrHandleTypePosixFD)
	require.NoError(t, err)
	require.Equal(t, 1, v)

	h, err := c.MemCreate(g, driver.HandlePosixFD)
	require.NoError(t, err)
	p, err := c.MapAndGrant(h, g)
	require.NoError(t, err)
	_, err = c.IpcGetMemHandle(p)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidValue), "legacy IPC of VMM memory: %v", err)
	require.Error(t, c.MemFree(p), "cuMemFree of a mapping")
	base, size, err := c.MemAddressRange(p + 100)
	require.NoError(t, err)
	require.Equal(t, p, base)
	require.Equal(t, g, size)
	require.NoError(t, c.MemcpyHtoD(p+8, []byte("shared")))

	fd, err := c.ExportFD(h)
	require.NoError(t, err)
	c1, err := d.RetainPrimaryContext(1)
	require.NoError(t, err)
	h1, err := c1.ImportFD(fd)
	require.NoError(t, err)
	require.NoError(t, syscall.Close(fd))
	_, err = c1.ImportFD(fd)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidValue), "importing a closed descriptor: %v", err)
	p1, err := c1.MapAndGrant(h1, g)
	require.NoError(t, err)
	require.NoError(t, c1.MemRelease(h1)) // the mapping keeps it
	require.NotEqual(t, p, p1)
	got := make([]byte, 6)
	require.NoError(t, c1.MemcpyDtoH(got, p1+8))
	require.Equal(t, "shared", string(got))
	_, err = c1.MapAndGrant(h1, g)
	require.Error(t, err, "mapping a released handle")

	n, err := fakecuda.Read(lib)
	require.NoError(t, err)
	require.Equal(t, [4]int64{2, 2, 2, 1}, [4]int64{n.VMMAllocations, n.VMMMappings, n.VMMReservations, n.FDExports})
	require.NoError(t, c1.Unmap(p1, g))
	require.NoError(t, c1.Release())
	require.NoError(t, c.Unmap(p, g))
	require.NoError(t, c.MemRelease(h))
	require.Error(t, c.MemRelease(h), "releasing twice")
	n, err = fakecuda.Read(lib)
	require.NoError(t, err)
	require.Equal(t, "1 context retains", n.Live())
	require.Zero(t, n.DeviceAllocs)
	testutil.RequireFDs(t, fds)
}

// TestVMMRefuses checks the stub's VMM calls refuse what the real driver
// does: a size off the granularity, a fabric handle, a descriptor that is
// no exported allocation, a mapping larger than the allocation.
func TestVMMRefuses(t *testing.T) {
	_, d, c := load(t)
	_, err := c.MemCreate(1<<20, driver.HandlePosixFD)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidValue), "%v", err)
	_, err = c.MemCreate(2<<20, driver.HandleFabric)
	require.True(t, driver.IsCode(err, driver.ErrorNotSupported), "%v", err)
	v, err := d.DeviceAttribute(0, driver.AttrHandleTypeFabric)
	require.NoError(t, err)
	require.Zero(t, v)
	_, err = c.ImportFD(0) // stdin: not an allocation
	require.True(t, driver.IsCode(err, driver.ErrorInvalidValue), "%v", err)
	_, err = c.ImportFabric(driver.FabricHandle{})
	require.True(t, driver.IsCode(err, driver.ErrorNotSupported), "%v", err)
	h, err := c.MemCreate(2<<20, driver.HandlePosixFD)
	require.NoError(t, err)
	_, err = c.MapAndGrant(h, 4<<20)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidValue), "%v", err)
	require.NoError(t, c.MemRelease(h))
}
