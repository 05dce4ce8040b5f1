package a2a_test

// A process per rank over the stub driver, the buffers shared as file
// descriptors (legacy IPC handles of the stub open only in their own
// process): the ranks fetch each other's descriptors over their sockets
// and import them onto the same memfd, so what one process writes into
// its buffer the others read through their mappings; a rank killed before
// its peers fetch its descriptor, or after they mapped its buffer, leaves
// them a clear error or a mapping that still works, and nothing held
// after Close.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/launch"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func init() {
	scenarios["share-read"] = func(rk launch.Rank) error { return fakeFDWorker(rk, false) }
	scenarios["share-killed"] = func(rk launch.Rank) error { return fakeFDWorker(rk, true) }
}

// envVictim names the rank that kills itself in fake-fd-killed, and
// envVictimWhen when: "fetch" (right after the handles are exchanged, as
// its peers fetch its descriptor) or "mapped" (once everyone is
// connected).
const (
	envVictim     = "ULYSSES_TEST_VICTIM"
	envVictimWhen = "ULYSSES_TEST_VICTIM_WHEN"
)

// TestFakeSharingProcesses: three processes on two stub devices share
// their buffers as descriptors and read each other's bytes through the
// mappings; each ends with no descriptor, allocation or mapping left.
func TestFakeSharingProcesses(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	runGroup(t, "share-read", 3, nil, driver.EnvLibrary+"="+lib, fakecuda.EnvDevices+"=2")
}

// TestFakeSharingKilledPeer: rank 2 is killed (SIGKILL) once the handles
// are exchanged, before its peers fetch its descriptor; as soon as it has
// sent its first descriptor (in flight); or after they mapped its buffer.
// The others get ErrShare in the first case, ErrShare or a mapping in the
// second, and keep reading its memory in the third; both close with
// nothing left, and their device still makes and connects a Comm.
func TestFakeSharingKilledPeer(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	for _, when := range []string{"fetch", "in-flight", "mapped"} {
		t.Run(when, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := launch.Run(ctx, launch.Spec{
				Exe: os.Args[0], Args: testutil.ScenarioArgs(), World: 3, Output: testWriter{t},
				Env: append(testutil.ScenarioEnv("share-killed"), driver.EnvLibrary+"="+lib, fakecuda.EnvDevices+"=2",
					envVictim+"=2", envVictimWhen+"="+when),
			})
			require.ErrorContains(t, err, "rank 2 failed first: signal: killed (a signal the launcher did not send)", "the victim alone failed")
			require.NotContains(t, err.Error(), "rank 0")
			require.NotContains(t, err.Error(), "rank 1:")
			for _, r := range res[:2] {
				require.Contains(t, r.Output, fmt.Sprintf("OK rank %d", r.Rank))
			}
		})
	}
}

// fakeFDWorker is one rank of the two scenarios.
func fakeFDWorker(rk launch.Rank, killed bool) error {
	// SharingDefault is what ULYSSES_TEST_SHARING says where it is set
	// (the GPU runs of these scenarios), else fd.
	sharing := a2a.SharingFD
	if os.Getenv(a2a.EnvTestSharing) != "" {
		sharing = a2a.SharingDefault
	}
	// The real driver keeps the descriptors it opens with its first
	// context (the device files, an eventfd, pipes, a socket) for the
	// process's life: count the group's own against a baseline taken
	// once a Comm of one has come and gone.
	if err := oneRankComm(rk.Device, sharing); err != nil {
		return fmt.Errorf("a Comm before the group: %w", err)
	}
	fds, err := testutil.ListFDs()
	if err != nil {
		return err
	}
	fmt.Printf("rank %d: %d descriptors open before the group\n", rk.Rank, len(fds))
	victim := killed && fmt.Sprint(rk.Rank) == os.Getenv(envVictim)
	when := os.Getenv(envVictimWhen)
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	cfg := a2a.Config{Rank: rk.Rank, WorldSize: rk.World, Device: rk.Device, MaxTokens: 16, HiddenDim: 64, DType: a2a.BFloat16,
		Sharing: sharing, Timeout: 5 * time.Second}
	c, err := a2a.New(cfg)
	if err != nil {
		return err
	}
	exchanged := make(chan struct{})
	if victim && when == "in-flight" {
		// Before the handles go out: a peer whose exchange ends first may
		// fetch the descriptor before this rank's own exchange returns.
		a2a.KillAfterGive(exchanged)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	handles, err := ex.AllGather(ctx, c.Handle())
	close(exchanged)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	if victim && when == "fetch" {
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if victim && when == "in-flight" {
		// Its descriptor goes out bound to its group, which Connect names:
		// connect, and die as the first descriptor leaves.
		go func() { _ = c.Connect(handles) }()
		time.Sleep(time.Minute) // until a peer's fetch kills it
		return errors.New("no peer fetched the victim's descriptor")
	}
	if killed && when == "in-flight" {
		// The victim dies once it has sent its first descriptor: the peer
		// that fetched it maps its memory (the descriptor keeps it), the
		// other fails with ErrShare.
		err := c.Connect(handles)
		if err != nil && !errors.Is(err, a2a.ErrShare) {
			return errors.Join(fmt.Errorf("connect with a peer killed with its descriptor in flight: %v, want ErrShare or success", err), c.Close())
		}
		fmt.Printf("rank %d: connect: %v\n", rk.Rank, err)
		return finishFD(rk, c, ex, fds)
	}
	if killed && when == "fetch" {
		// Let the victim die before this rank fetches its descriptor (a
		// death in the middle of a fetch is internal/fdshare's
		// TestFetchDistrusts): the fetch must fail, whichever peer this
		// rank maps first.
		time.Sleep(300 * time.Millisecond)
	}
	err = c.Connect(handles)
	if killed && when == "fetch" {
		if !errors.Is(err, a2a.ErrShare) {
			return errors.Join(fmt.Errorf("connect with a killed peer: %v, want ErrShare", err), c.Close())
		}
		fmt.Printf("rank %d: %v\n", rk.Rank, err)
		return finishFD(rk, c, ex, fds)
	}
	if err != nil {
		return errors.Join(err, c.Close())
	}
	if err := readPeers(ctx, rk, c, ex, victim); err != nil {
		return errors.Join(err, c.Close())
	}
	return finishFD(rk, c, ex, fds)
}

// readPeers writes this rank's mark into its buffer, waits for every rank
// to have done so (an all-gather), and reads every peer's through this
// process's mapping. The victim of "mapped" dies once the marks are
// written; the others read its mark after its death.
func readPeers(ctx context.Context, rk launch.Rank, c *a2a.Comm, ex a2a.Exchanger, victim bool) error {
	if n := a2a.LiveVMMMappings(); c.Sharing() == a2a.SharingFD && n != int64(rk.World) {
		return fmt.Errorf("rank %d holds %d VMM mappings once connected, want its own and its %d peers'", rk.Rank, n, rk.World-1)
	}
	mark := func(r int) []byte { return []byte(fmt.Sprintf("rank %d's buffer", r)) }
	if err := a2a.WriteOwnBuffer(c, mark(rk.Rank)); err != nil {
		return err
	}
	if _, err := ex.AllGather(ctx, nil); err != nil {
		return err
	}
	if victim {
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if os.Getenv(envVictim) != "" {
		time.Sleep(100 * time.Millisecond) // let the victim die first
	}
	for r := 0; r < rk.World; r++ {
		got, err := a2a.ReadPeerBuffer(c, r, len(mark(r)))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, mark(r)) {
			return fmt.Errorf("rank %d reads %q in rank %d's buffer, want %q", rk.Rank, got, r, mark(r))
		}
	}
	return nil
}

// finishFD closes c and ex, checks that no VMM mapping, no descriptor
// and (over the stub) nothing of the driver's is left, and that the
// device still makes and connects a Comm.
func finishFD(rk launch.Rank, c *a2a.Comm, ex *exchange.TCP, fds []string) error {
	if err := c.Close(); err != nil {
		if !closeMissedPeer(err) {
			return fmt.Errorf("close: %w", err)
		}
		fmt.Printf("rank %d: close: %v\n", rk.Rank, err)
	}
	if err := ex.Close(); err != nil {
		return err
	}
	if err := oneRankComm(rk.Device, c.Sharing()); err != nil {
		return fmt.Errorf("a Comm after the group: %w", err)
	}
	if n := a2a.LiveVMMMappings(); n != 0 {
		return fmt.Errorf("rank %d holds %d VMM mappings after Close", rk.Rank, n)
	}
	if lib := os.Getenv(driver.EnvLibrary); lib != "" {
		n, err := fakecuda.Read(lib)
		if err != nil {
			return err
		}
		if live := n.Live(); live != "" {
			return fmt.Errorf("rank %d holds %s after Close", rk.Rank, live)
		}
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		now, err := testutil.ListFDs()
		if err != nil {
			return err
		}
		left := testutil.NewFDs(now, fds)
		if len(left) == 0 {
			fmt.Printf("rank %d: %d descriptors open after Close, 0 VMM mappings\n", rk.Rank, len(now))
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d left descriptors open: %s", rk.Rank, strings.Join(left, ", "))
		}
	}
	return nil
}

// closeMissedPeer reports whether err is Close's bounded wait for a
// goodbye that a scenario with a killed rank never gives: on a GPU a
// connected Comm's Close waits for every peer's farewell (the stub's
// kernels do not wait), and neither the dead rank nor a survivor whose
// Connect failed on it (in-flight) says one.
func closeMissedPeer(err error) bool {
	var te *a2a.TimeoutError
	return os.Getenv(envVictim) != "" && errors.As(err, &te) && te.Phase == a2a.PhaseClose
}

// oneRankComm makes, connects and closes a Comm of one on device.
func oneRankComm(device *int, sharing a2a.Sharing) error {
	one, err := a2a.New(a2a.Config{WorldSize: 1, Device: device, MaxTokens: 1, HiddenDim: 8, DType: a2a.BFloat16, Sharing: sharing})
	if err != nil {
		return err
	}
	return errors.Join(one.Connect([][]byte{one.Handle()}), one.Close())
}
