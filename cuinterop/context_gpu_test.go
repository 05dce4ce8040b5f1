package cuinterop_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/cuinterop"
	"github.com/ulysses-go/ulysses/internal/check"
)

// foreignFill is what the foreign context's memory holds throughout.
const foreignFill = 0x5A

// TestNewContextRefused: memory and a stream of a context that
// cu.NewContext made, and cu.NoStream with that context current, get
// ErrNotPrimaryContext naming device 0's primary context, before anything
// is enqueued: the foreign stream stays idle, the foreign memory keeps its
// bytes, and a Comm on device 0 still runs an operation on
// primary-context memory afterwards.
func TestNewContextRefused(t *testing.T) {
	lockThread()
	primary := openDevice(t, 0) // active, as under a Comm
	ctx := cu.NewContext(cu.Device(0), cu.SchedAuto)
	defer ctx.Close()
	shape := [4]int{1, 16, 4, 32}
	n := int64(shape[0] * shape[1] * shape[2] * shape[3] * a2a.BFloat16.Size())
	mem, err := ctx.MemAlloc(n)
	if err != nil {
		t.Fatalf("MemAlloc in cu.NewContext's context: %v", err)
	}
	if ctx.MemsetD8(mem, foreignFill, n); ctx.Error() != nil {
		t.Fatalf("MemsetD8 in cu.NewContext's context: %v", ctx.Error())
	}
	s, err := ctx.MakeStream(cu.NonBlocking)
	if err != nil {
		t.Fatalf("MakeStream in cu.NewContext's context: %v", err)
	}
	defer ctx.DestroyStream(&s)

	_, err = cuinterop.Tensor(mem, shape, a2a.BFloat16)
	wantPrimaryError(t, "Tensor", err)
	_, err = cuinterop.Stream(s)
	wantPrimaryError(t, "Stream", err)
	if err := cu.SetCurrentContext(ctx.CUDAContext()); err != nil {
		t.Fatal(err)
	}
	_, err = cuinterop.Stream(cu.NoStream)
	wantPrimaryError(t, "Stream(cu.NoStream)", err)
	primary.use(t)
	if st, err := cuinterop.Stream(cu.NoStream); err != nil || st != 0 {
		t.Errorf("Stream(cu.NoStream) with the primary context current: %#x, %v; want 0, nil", st, err)
	}

	if ctx.QueryStream(s); ctx.Error() != nil {
		t.Errorf("the foreign stream has work queued: cuStreamQuery: %v", ctx.Error())
	}
	got := make([]byte, n)
	if ctx.MemcpyDtoH(unsafe.Pointer(&got[0]), mem, n); ctx.Error() != nil {
		t.Fatal(ctx.Error())
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{foreignFill}, int(n))) {
		t.Error("the foreign memory changed")
	}
	commStillWorks(t, primary, shape)
}

// wantPrimaryError fails t unless err matches ErrNotPrimaryContext and
// names device 0's primary context and how to use it.
func wantPrimaryError(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, cuinterop.ErrNotPrimaryContext) {
		t.Errorf("%s of cu.NewContext's context: %v, want an error matching ErrNotPrimaryContext", what, err)
		return
	}
	for _, s := range []string{"not of device 0's primary context", "cu.Device(0).RetainPrimaryCtx()", "pctx.Lock()"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
	t.Logf("%s: %v", what, err)
}

// commStillWorks runs SendRecvHeads on a world-1 Comm of device 0 with
// primary-context memory and checks its output (world 1: a copy).
func commStillWorks(t *testing.T, d *device, shape [4]int) {
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: shape[0] * shape[1], HiddenDim: shape[2] * shape[3], DType: a2a.BFloat16}, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := g.Comm(0)
	in := make([]byte, shape[0]*shape[1]*shape[2]*shape[3]*a2a.BFloat16.Size())
	ref.FillRandom(in, 7, 0)
	x, err := cuinterop.Tensor(d.upload(t, in), shape, a2a.BFloat16)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetRankTokens([]int{shape[1]}); err != nil {
		t.Fatal(err)
	}
	v, err := c.SendRecvHeads(x)
	if err != nil {
		t.Fatalf("SendRecvHeads after the refusals: %v", err)
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := check.Compare("SendRecvHeads after the refusals", d.download(t, cuinterop.DevicePtr(v), len(in)), in); err != nil {
		t.Error(err)
	}
}
