package cuinterop_test

import (
	"testing"

	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
)

// TestCallerContextKept: with device 0's primary context current on this
// thread (gorgonia's style), a2a's calls on the last device leave it
// current, so the gorgonia calls after them allocate where the caller
// meant.
func TestCallerContextKept(t *testing.T) {
	lockThread()
	n, err := cu.NumDevices()
	if err != nil {
		t.Fatal(err)
	}
	mine := openDevice(t, 0)
	d, err := a2a.OpenDevice(n - 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mine.use(t)
	x, err := d.Alloc([4]int{1, 4, 4, 64}, a2a.BFloat16)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Fill(x, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(x); err != nil {
		t.Fatal(err)
	}
	cur, err := cu.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	if cur != mine.pctx {
		t.Errorf("after a2a's calls on device %d the current context is %v, want device 0's primary %v", n-1, cur, mine.pctx)
	}
}
