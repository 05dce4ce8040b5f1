package a2a_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/launch"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// TestSharingProcesses: four processes on GPU 0 share their buffers with
// each kind of sharing the GPU supports and read each other's bytes
// through their mappings; each ends with the descriptors it had before
// the group and no VMM mapping. The scenarios are sharing_process_fake_test.go's.
func TestSharingProcesses(t *testing.T) {
	info := requireGPU(t)
	for _, s := range gpuSharings(info) {
		t.Run(s.String(), func(t *testing.T) {
			runGroup(t, "share-read", 4, []int{0, 0, 0, 0}, a2a.EnvTestSharing+"="+s.String())
		})
	}
}

// TestSharingKilledPeer: over descriptors, rank 3 of four on GPU 0 is
// killed before its peers fetch its descriptor (they fail with ErrShare),
// as soon as it has sent one (its receiver maps the buffer, the others
// fail with ErrShare), or after they mapped its buffer (they read it on); the survivors close
// with their descriptors back and no mapping, and their GPU makes and
// connects a Comm again.
func TestSharingKilledPeer(t *testing.T) {
	info := requireGPU(t)
	if !info.Devices[0].PosixFD {
		t.Skip("GPU 0 does not share memory as file descriptors")
	}
	for _, when := range []string{"fetch", "in-flight", "mapped"} {
		t.Run(when, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := launch.Run(ctx, launch.Spec{
				Exe: os.Args[0], Args: testutil.ScenarioArgs(), World: 4, Devices: []int{0, 0, 0, 0}, Output: testWriter{t},
				Env: append(testutil.ScenarioEnv("share-killed"), a2a.EnvTestSharing+"=fd", envVictim+"=3", envVictimWhen+"="+when),
			})
			require.ErrorContains(t, err, "rank 3 failed first: signal: killed (a signal the launcher did not send)")
			for _, r := range res[:3] {
				require.Contains(t, r.Output, fmt.Sprintf("OK rank %d", r.Rank))
			}
		})
	}
}

// gpuSharings are the kinds of sharing every GPU of info supports.
func gpuSharings(info a2a.SystemInfo) []a2a.Sharing {
	out := []a2a.Sharing{a2a.SharingLegacyIPC}
	for _, d := range info.Devices {
		if !d.PosixFD {
			return out
		}
	}
	return append(out, a2a.SharingFD)
}

// TestSharingCrowded: groups of 2 and of 4 processes on GPU 0 form 15
// times each over descriptors while rank 0's socket is crowded, as
// TestFakeSharingCrowded does over the stub; every Connect takes under a
// second.
func TestSharingCrowded(t *testing.T) {
	info := requireGPU(t)
	if !info.Devices[0].PosixFD {
		t.Skip("GPU 0 does not share memory as file descriptors")
	}
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			runGroup(t, "share-crowded", world, make([]int, world))
		})
	}
}
