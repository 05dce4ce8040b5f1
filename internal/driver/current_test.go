package driver

import (
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
)

// requireCallerContextKept makes want current on this (locked) thread, as
// another binding would, runs a call of c's, and checks that want is
// current again after it: c's calls push their context and pop it.
func requireCallerContextKept(t *testing.T, d *Driver, c *Context, want uintptr) {
	t.Helper()
	if d.fn.ctxSetCurrent == 0 {
		t.Fatal(d.missing("cuCtxSetCurrent"))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r, _, _ := purego.SyscallN(d.fn.ctxSetCurrent, want); resultOf(r) != Success {
		t.Fatal(d.check("cuCtxSetCurrent", r))
	}
	p, err := c.MemAlloc(256)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MemFree(p); err != nil {
		t.Fatal(err)
	}
	cur, err := d.current()
	if err != nil {
		t.Fatal(err)
	}
	if cur != want {
		t.Errorf("after device %d's calls the thread's context is %#x, want the caller's %#x", c.Ordinal(), cur, want)
	}
}
