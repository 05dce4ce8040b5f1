package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func init() {
	scenarios["nccl-collectives"] = workerNCCLCollectives
	scenarios["nccl-timeout"] = workerNCCLTimeout
	scenarios["nccl-killed-peer"] = workerNCCLKilledPeer
	scenarios["auto-transport"] = workerAutoTransport
}

// ncclNetEnv makes NCCL take its network path between the ranks (sockets),
// as between two hosts, instead of peer-to-peer copies or shared memory.
var ncclNetEnv = []string{"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}

// requireNCCL skips the test without a GPU or NCCL (or fails under
// ULYSSES_REQUIRE_GPU=1) and returns the GPU count. NCCL is found as the
// transport finds it ($ULYSSES_LIBNCCL or libnccl.so.2).
func requireNCCL(t *testing.T) int {
	t.Helper()
	info := requireGPU(t)
	version, path, err := a2a.NCCLVersion()
	testutil.RequireGPU(t, err, a2a.ErrNoNCCL)
	t.Logf("NCCL %d from %s", version, path)
	return len(info.Devices)
}

// requireTwoGPUs skips a test of two ranks on distinct GPUs (NCCL refuses
// two ranks of a communicator on one GPU) on a machine with one.
func requireTwoGPUs(t *testing.T, gpus int) {
	t.Helper()
	if gpus < 2 {
		t.Skipf("%d GPU: NCCL needs a GPU per rank", gpus)
	}
}

// TestNCCLTransport runs every collective case and the back-to-back race
// over NCCL, exactly and over the fp8 wire (workerNCCLCollectives): one
// rank alone, two ranks with NCCL's own choice of path (peer to peer over
// NVLink here), and two ranks over its network path.
func TestNCCLTransport(t *testing.T) {
	gpus := requireNCCL(t)
	t.Run("world1", func(t *testing.T) { runGroup(t, "nccl-collectives", 1, nil) })
	t.Run("world2", func(t *testing.T) {
		requireTwoGPUs(t, gpus)
		runGroup(t, "nccl-collectives", 2, nil)
	})
	t.Run("world2-network", func(t *testing.T) {
		requireTwoGPUs(t, gpus)
		runGroup(t, "nccl-collectives", 2, nil, ncclNetEnv...)
	})
}

// TestNCCLGroup: NewGroup over NCCL in this process, a rank per GPU,
// every collective case on every rank at once, compared with the CPU
// reference, then the back-to-back race with late reads.
func TestNCCLGroup(t *testing.T) {
	gpus := requireNCCL(t)
	devices := make([]int, gpus)
	for d := range devices {
		devices[d] = d
	}
	cases := collectiveCases(gpus, a2a.BFloat16)
	g := newTestGroup(t, devices, a2a.BFloat16, cases, withTransport(a2a.TransportNCCL))
	for r := range g.Size() {
		require.Equal(t, a2a.TransportNCCL, g.Comm(r).Transport(), "rank %d", r)
	}
	require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return runNCCLCases(c, cases, a2a.BFloat16) }))
}

// workerNCCLCollectives: every case of collectiveCases, views and Into
// forms, packed and general, compared with the CPU reference, then the
// back-to-back race with late reads, in both element widths and both
// buffer modes, and over the fp8 wire in both formats and 16-bit types
// (outputs compared with the reference's rows round-tripped, on random
// bit patterns and on narrow values).
func workerNCCLCollectives(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	for _, mode := range []struct {
		dt     a2a.DType
		single bool
		wire   a2a.Wire
	}{{a2a.BFloat16, false, a2a.WireExact}, {a2a.Float8E4M3, false, a2a.WireExact}, {a2a.BFloat16, true, a2a.WireExact},
		{a2a.BFloat16, false, a2a.WireE4M3}, {a2a.Float16, true, a2a.WireE5M2}} {
		fmt.Printf("mode nccl %v single-buffer=%v wire=%v\n", mode.dt, mode.single, mode.wire)
		cases := collectiveCases(rk.World, mode.dt)
		comm, err := joinFor(rk, ex, mode.dt, cases, mode.single, withTransport(a2a.TransportNCCL), withWire(mode.wire))
		if err != nil {
			return err
		}
		if got := comm.Transport(); got != a2a.TransportNCCL {
			comm.Close()
			return fmt.Errorf("the Comm's transport is %v, want nccl", got)
		}
		if err := runNCCLCases(comm, cases, mode.dt); err != nil {
			comm.Close()
			return err
		}
		if err := comm.Close(); err != nil {
			return err
		}
	}
	return nil
}

func runNCCLCases(comm *a2a.Comm, cases []check.Case, dt a2a.DType) error {
	lossy := comm.Config().Wire.Lossy()
	for i, c := range cases {
		for _, narrow := range []bool{false, true} {
			if narrow && !lossy {
				continue
			}
			c.Narrow = narrow
			start := time.Now()
			if err := check.Run(comm, c, uint64(2000+i)); err != nil {
				return fmt.Errorf("%v: %w", c, err)
			}
			fmt.Printf("PASS %v (%v)\n", c, time.Since(start).Round(time.Millisecond))
		}
	}
	iters := backToBackIters()
	race := check.Case{Name: "back-to-back", Batch: 2, Tokens: cases[1].Tokens, Heads: 3*comm.WorldSize() + 1, HeadDim: 64, DType: dt, Narrow: lossy}
	start := time.Now()
	if err := check.BackToBack(comm, race, iters, 3*time.Millisecond, 78); err != nil {
		return fmt.Errorf("%v: %w", race, err)
	}
	fmt.Printf("PASS %v x%d (%v)\n", race, iters, time.Since(start).Round(time.Millisecond))
	return nil
}

// TestNCCLTimeout: rank 1 stops taking part while rank 0 runs an
// operation over NCCL. Rank 0 must get the failure bounded, the Comm
// broken, the CUDA context usable: when the peer never connected, the
// operation's call (or Sync) times out; when it stops after connecting,
// the launched operation's Sync times out within [timeout, 1.5*timeout +
// 1 s], a SyncContext ends with its context, and a Close ends a blocked
// Sync with ErrClosed.
func TestNCCLTimeout(t *testing.T) {
	gpus := requireNCCL(t)
	requireTwoGPUs(t, gpus)
	runGroup(t, "nccl-timeout", 2, nil)
}

func workerNCCLTimeout(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	const timeout = 2 * time.Second
	for _, stall := range []string{"never-connected", "sync-timeout", "sync-context", "close-during-sync"} {
		cs := smallCase(rk.World, a2a.BFloat16)
		comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, false, withTransport(a2a.TransportNCCL))
		if err != nil {
			return err
		}
		if err := comm.SetTimeout(timeout); err != nil {
			return err
		}
		if stall != "never-connected" {
			// Both ranks connect with one operation; then rank 1 stops.
			if err := check.Run(comm, cs, 13); err != nil {
				comm.Close()
				return fmt.Errorf("%s, before the stall: %w", stall, err)
			}
		}
		if err := comm.SetRankTokens(cs.Tokens); err != nil {
			return err
		}
		if rk.Rank == 0 {
			if err := ncclStallOnRank0(comm, cs, timeout, stall); err != nil {
				comm.Close()
				return fmt.Errorf("%s: %w", stall, err)
			}
		}
		if err := rendezvous(ex, stall); err != nil {
			return err
		}
		start := time.Now()
		err = comm.Close()
		fmt.Printf("%s: rank %d closed in %v: %v\n", stall, rk.Rank, time.Since(start).Round(time.Millisecond), err)
		if rk.Rank == 0 && err != nil {
			return fmt.Errorf("%s: Close of a broken Comm: %w", stall, err)
		}
	}
	return nil
}

func ncclStallOnRank0(comm *a2a.Comm, cs check.Case, timeout time.Duration, stall string) error {
	dev, err := heldDevice(comm)
	if err != nil {
		return err
	}
	defer dev.Close()
	kept, keep, err := keptMemory(dev, 9)
	if err != nil {
		return err
	}
	defer dev.Free(kept)
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[0], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	start := time.Now()
	_, err = comm.SendRecvHeads(x)
	switch {
	case err != nil && stall != "never-connected":
		return fmt.Errorf("enqueue after the peers connected: %w", err)
	case err != nil: // the group could not be launched without the peer
	case stall == "sync-context":
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = comm.SyncContext(ctx)
		cancel()
		fmt.Printf("sync-context ended after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			return fmt.Errorf("SyncContext returned %v after %v, want the context's deadline within 2 s", err, time.Since(start))
		}
		if _, err := comm.AllGather(x); !errors.Is(err, a2a.ErrAborted) {
			return fmt.Errorf("operation after SyncContext gave up returned %v, want ErrAborted", err)
		}
		return contextSurvived(dev, kept, keep)
	case stall == "close-during-sync":
		done := make(chan error, 1)
		go func() { done <- comm.Sync() }()
		time.Sleep(200 * time.Millisecond)
		if err := comm.Close(); err != nil {
			return fmt.Errorf("Close during a Sync: %w", err)
		}
		select {
		case err = <-done:
		case <-time.After(3 * time.Second):
			return errors.New("Sync still blocked 3 s after Close")
		}
		fmt.Printf("close-during-sync: Sync ended after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		if !errors.Is(err, a2a.ErrClosed) {
			return fmt.Errorf("Sync ended by Close returned %v, want ErrClosed", err)
		}
		return contextSurvived(dev, kept, keep)
	default:
		err = comm.Sync()
	}
	took := time.Since(start)
	fmt.Printf("%s: timeout %v fired after %v: %v\n", stall, timeout, took.Round(time.Millisecond), err)
	var te *a2a.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, a2a.ErrTimeout) {
		return fmt.Errorf("got %v, want a *TimeoutError", err)
	}
	if err := brokenInTime(comm, x, took, timeout); err != nil {
		return err
	}
	return contextSurvived(dev, kept, keep)
}

// TestNCCLKilledPeer: rank 1 SIGKILLs itself in the middle of a run of
// operations over NCCL (its network path, where a dead peer's sockets
// close, and its own choice); rank 0 must get an error, not hang, close,
// and find its CUDA context usable.
func TestNCCLKilledPeer(t *testing.T) {
	gpus := requireNCCL(t)
	requireTwoGPUs(t, gpus)
	for name, env := range map[string][]string{"default": nil, "network": ncclNetEnv} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := launch.Run(ctx, launch.Spec{
				Exe: os.Args[0], Args: testutil.ScenarioArgs(), World: 2,
				Env:    append(testutil.ScenarioEnv("nccl-killed-peer"), env...),
				Output: testWriter{t}, Grace: 2 * time.Minute,
			})
			require.Error(t, err, "the victim must die")
			var exitErr *exec.ExitError
			require.ErrorAs(t, res[1].Err, &exitErr)
			ws, ok := exitErr.Sys().(syscall.WaitStatus)
			require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "rank 1 ended with %v, want SIGKILL", res[1].Err)
			require.NoError(t, res[0].Err, "the survivor")
			require.Contains(t, res[0].Output, "stopped")
			require.Contains(t, res[0].Output, "OK rank 0")
		})
	}
}

func workerNCCLKilledPeer(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	cs := smallCase(rk.World, a2a.BFloat16)
	comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, false, withTransport(a2a.TransportNCCL))
	if err != nil {
		return err
	}
	if err := comm.SetTimeout(3 * time.Second); err != nil {
		return err
	}
	if err := comm.SetRankTokens(cs.Tokens); err != nil {
		return err
	}
	dev, err := heldDevice(comm)
	if err != nil {
		return err
	}
	defer dev.Close()
	kept, keep, err := keptMemory(dev, 10)
	if err != nil {
		return err
	}
	defer dev.Free(kept)
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[rk.Rank], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	if err := dev.Fill(x, 3); err != nil {
		return err
	}
	start := time.Now()
	for i := 0; ; i++ {
		if rk.Rank == 1 && i == 300 {
			fmt.Printf("rank 1: SIGKILL after %d operations\n", i)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		_, err := comm.AllGather(x)
		if err == nil {
			err = comm.Sync()
		}
		if err != nil {
			fmt.Printf("rank %d: operation %d stopped %v after start: %v\n", rk.Rank, i, time.Since(start).Round(time.Millisecond), err)
			break
		}
		if time.Since(start) > time.Minute {
			comm.Close()
			return errors.New("no failure within a minute of the peer's death")
		}
	}
	closeStart := time.Now()
	err = comm.Close()
	fmt.Printf("rank %d closed in %v: %v\n", rk.Rank, time.Since(closeStart).Round(time.Millisecond), err)
	if err != nil {
		return fmt.Errorf("Close after the peer died: %w", err)
	}
	return contextSurvived(dev, kept, keep)
}

// heldDevice opens comm's device on its own, so that the CUDA context and
// what was allocated on it outlive comm's Close (the context is released
// with the last Comm or Device on it): the tests check it after the Comm
// failed and closed.
func heldDevice(comm *a2a.Comm) (*a2a.Device, error) {
	return a2a.OpenDevice(comm.Device().Info().Ordinal)
}

// TestAutoTransport: TransportAuto on two GPUs of one host with peer
// access picks IPC on every rank (the stub driver's tests cover NCCL where
// a pair has no peer access).
func TestAutoTransport(t *testing.T) {
	info := requireGPU(t)
	requireTwoGPUs(t, len(info.Devices))
	runGroup(t, "auto-transport", 2, nil)
}

func workerAutoTransport(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	cs := smallCase(rk.World, a2a.BFloat16)
	comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, false, withTransport(a2a.TransportAuto))
	if err != nil {
		return err
	}
	defer comm.Close()
	if got := comm.Transport(); got != a2a.TransportIPC {
		return fmt.Errorf("auto chose %v on one host with peer access, want ipc", got)
	}
	return check.Run(comm, cs, 12)
}
