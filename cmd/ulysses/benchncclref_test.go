package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	"github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// envWantRefs says which references TestNCCLReferenceChild must find:
// "all", "window" (the send to itself, also on a window) or "send" (the
// send to itself alone).
const envWantRefs = "ULYSSES_TEST_WANT_REFS"

// TestNCCLReference times NCCL's own references against the stub driver
// and the stub NCCL, each case in a child process (both libraries load
// once per process): an NCCL of 2.28 gives all four; one of 2.27 (no
// ncclAlltoAll, no CTA policy) the send to itself, also on a window; one
// of 2.26 (no windows either) the send alone. Nothing fails.
func TestNCCLReference(t *testing.T) {
	cuda, lib := testutil.FakeCUDA(t), testutil.FakeNCCL(t)
	for _, tc := range []struct {
		name, version, want string
	}{{"nccl-2.28", "22809", "all"}, {"nccl-2.27", "22703", "window"}, {"nccl-2.26", "22605", "send"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Log(testutil.RunChild(t, "TestNCCLReferenceChild", driver.EnvLibrary+"="+cuda, nccl.EnvLibrary+"="+lib,
				fakenccl.EnvVersion+"="+tc.version, envWantRefs+"="+tc.want))
		})
	}
}

func TestNCCLReferenceChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	drv, err := driver.Load()
	require.NoError(t, err)
	ctx, err := drv.RetainPrimaryContext(0)
	require.NoError(t, err)
	ref, err := timeNCCLReference(ctx, 1<<16, 1, 3)
	require.NoError(t, err)
	t.Logf("%+v", ref)
	require.Empty(t, ref.Note)
	require.Positive(t, ref.SendSelfUS)
	want := os.Getenv(envWantRefs)
	// What this NCCL lacks is not timed (0).
	require.Equal(t, want == "all", ref.AlltoAllUS > 0, "ncclAlltoAll")
	require.Equal(t, want != "send", ref.WindowSendSelfUS > 0, "the send on a window")
	require.Equal(t, want == "all", ref.ZeroCTAAlltoAllUS > 0, "ncclAlltoAll of the zero-CTA policy")
}
