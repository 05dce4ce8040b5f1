package a2a_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func init() {
	scenarios["timeout"] = workerTimeout
	scenarios["killed-peer"] = workerKilledPeer
	scenarios["replacement"] = workerReplacement
	scenarios["mismatch"] = workerMismatch
}

// envAddr2 is where the survivors of the killed-peer scenario regroup.
const envAddr2 = "ULYSSES_TEST_ADDR2"

// envMover names the Mover of the killed-peer scenario's Comms.
const envMover = "ULYSSES_TEST_MOVER"

// moverFromEnv is the Mover envMover names: the copy engines when it says
// so, else the kernels.
func moverFromEnv() a2a.Mover {
	if os.Getenv(envMover) == a2a.MoverCopyEngines.String() {
		return a2a.MoverCopyEngines
	}
	return a2a.MoverKernels
}

func rendezvous(ex *exchange.TCP, what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := ex.AllGather(ctx, []byte(what)); err != nil {
		return fmt.Errorf("rendezvous %s: %w", what, err)
	}
	return nil
}

func smallCase(world int, dt a2a.DType) check.Case {
	tokens := make([]int, world)
	for r := range tokens {
		tokens[r] = 8 + r
	}
	return check.Case{Name: "small", Batch: 1, Tokens: tokens, Heads: 2 * world, HeadDim: 64, DType: dt}
}

// workerTimeout: rank 1 joins but never runs the operation; rank 0's
// barrier must time out within [timeout, 1.5*timeout + 1 s], leave the Comm
// broken, and leave the process's CUDA context usable.
func workerTimeout(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	for _, tc := range []struct {
		timeout time.Duration
		single  bool
		mover   a2a.Mover
	}{
		{time.Second, false, a2a.MoverKernels}, {time.Second, true, a2a.MoverKernels}, {5 * time.Second, false, a2a.MoverKernels},
		{time.Second, false, a2a.MoverCopyEngines}, {time.Second, true, a2a.MoverCopyEngines},
	} {
		cs := smallCase(rk.World, a2a.BFloat16)
		comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, tc.single, withMover(tc.mover))
		if err != nil {
			return err
		}
		if err := comm.SetTimeout(tc.timeout); err != nil {
			return err
		}
		if err := comm.SetRankTokens(cs.Tokens); err != nil {
			return err
		}
		if rk.Rank == 0 {
			if err := timeoutOnRank0(comm, cs, tc.timeout, tc.single); err != nil {
				comm.Close()
				return err
			}
		}
		// Rank 1 waits here, its Comm idle, until rank 0 is done.
		if err := rendezvous(ex, "timed out"); err != nil {
			return err
		}
		start := time.Now()
		err = comm.Close()
		fmt.Printf("rank %d closed in %v: %v\n", rk.Rank, time.Since(start).Round(time.Millisecond), err)
		if rk.Rank == 0 && err != nil {
			return fmt.Errorf("Close of a broken Comm: %w", err)
		}
		if rk.Rank == 1 && err != nil {
			// Rank 0 said goodbye in its own Close (without waiting for
			// anyone, since its Comm broke on a timeout): rank 1's Close
			// finds the goodbye and returns at once.
			return fmt.Errorf("Close after the peer's goodbye: %w", err)
		}
	}
	return nil
}

func timeoutOnRank0(comm *a2a.Comm, cs check.Case, timeout time.Duration, single bool) error {
	dev := comm.Device()
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
	if err := dev.Fill(x, 7); err != nil {
		return err
	}
	start := time.Now()
	if _, err := comm.SendRecvHeads(x); err != nil {
		return err
	}
	// Queue more: they must not each wait out another timeout.
	for i := 0; i < 3; i++ {
		if _, err := comm.AllGather(x); err != nil && !errors.Is(err, a2a.ErrTimeout) {
			return fmt.Errorf("queueing behind a stuck operation: %w", err)
		}
	}
	err = comm.Sync()
	took := time.Since(start)
	fmt.Printf("timeout %v single-buffer=%v %v fired after %v: %v\n", timeout, single, comm.Config().Mover, took.Round(time.Millisecond), err)
	var te *a2a.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, a2a.ErrTimeout) {
		// A queued op may have reported it already; the next call says broken.
		if !errors.Is(err, a2a.ErrBroken) {
			return fmt.Errorf("Sync returned %v, want a *TimeoutError", err)
		}
	}
	if te != nil && (te.Rank != 0 || te.Peer != 1) {
		return fmt.Errorf("timeout names rank %d waiting for %d, want 0 waiting for 1", te.Rank, te.Peer)
	}
	wantPhase := a2a.PhaseEnd
	if single {
		wantPhase = a2a.PhaseStart
	}
	if te != nil && te.Phase != wantPhase {
		return fmt.Errorf("timed out in phase %v, want %v", te.Phase, wantPhase)
	}
	if err := brokenInTime(comm, x, took, timeout); err != nil {
		return err
	}
	if err := comm.Sync(); !errors.Is(err, a2a.ErrBroken) {
		return fmt.Errorf("Sync after a timeout returned %v, want ErrBroken", err)
	}
	return contextSurvived(dev, kept, keep)
}

// brokenInTime checks that a timeout of timeout fired after took, between
// timeout and 1.5*timeout + 1 s, and that the Comm is broken after it.
func brokenInTime(comm *a2a.Comm, x a2a.Tensor, took, timeout time.Duration) error {
	if took < timeout || took > timeout*3/2+time.Second {
		return fmt.Errorf("timeout of %v fired after %v", timeout, took)
	}
	if _, err := comm.AllGather(x); !errors.Is(err, a2a.ErrBroken) {
		return fmt.Errorf("operation after a timeout returned %v, want ErrBroken", err)
	}
	return nil
}

// keptMemory allocates 4 KiB on dev holding random bytes (keep) that must
// survive a failure: contextSurvived checks them.
func keptMemory(dev *a2a.Device, seed uint64) (a2a.Tensor, []byte, error) {
	keep := make([]byte, 4096)
	ref.FillRandom(keep, seed, 0)
	kept, err := dev.Alloc([4]int{1, 1, 1, len(keep)}, a2a.Float8E4M3)
	if err != nil {
		return a2a.Tensor{}, nil, err
	}
	if err := dev.Upload(kept, keep); err != nil {
		dev.Free(kept)
		return a2a.Tensor{}, nil, err
	}
	return kept, keep, nil
}

// contextSurvived checks that the process's CUDA context is usable after
// a Comm failed: kept still holds keep, and a new Comm on the device
// passes a case.
func contextSurvived(dev *a2a.Device, kept a2a.Tensor, keep []byte) error {
	got, err := dev.Download(kept)
	if err != nil {
		return fmt.Errorf("context unusable after the timeout: %w", err)
	}
	if !bytes.Equal(got, keep) {
		return errors.New("memory changed across the timeout")
	}
	// A new Comm on the same context works.
	solo, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, Device: a2a.DeviceOrdinal(dev.Info().Ordinal), MaxTokens: 64, HiddenDim: 128, DType: a2a.BFloat16})
	if err != nil {
		return fmt.Errorf("new Comm after a timeout: %w", err)
	}
	defer solo.Close()
	if err := solo.Connect([][]byte{solo.Handle()}); err != nil {
		return err
	}
	return check.Run(solo, check.Case{Name: "after-timeout", Batch: 1, Tokens: []int{16}, Heads: 4, HeadDim: 32, DType: a2a.BFloat16}, 5)
}

// workerKilledPeer: the last rank SIGKILLs itself in the middle of a run of
// operations; the survivors must get a timeout (no hang, no crash), close,
// and form a new group with a replacement process.
func workerKilledPeer(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	cs := smallCase(rk.World, a2a.BFloat16)
	comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, false, withMover(moverFromEnv()))
	if err != nil {
		return err
	}
	if err := comm.SetTimeout(2 * time.Second); err != nil {
		return err
	}
	if err := comm.SetRankTokens(cs.Tokens); err != nil {
		return err
	}
	dev := comm.Device()
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[rk.Rank], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	if err := dev.Fill(x, 3); err != nil {
		return err
	}
	victim := rk.World - 1
	var failedAt time.Time
	start := time.Now()
	for i := 0; ; i++ {
		if rk.Rank == victim && i == 300 {
			fmt.Printf("rank %d: SIGKILL after %d operations\n", rk.Rank, i)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		_, err := comm.AllGather(x)
		if err == nil {
			err = comm.Sync()
		}
		if err != nil {
			failedAt = time.Now()
			// A survivor times out on the dead rank, or sees the other
			// survivor's goodbye if that one timed out and closed first.
			if !errors.Is(err, a2a.ErrTimeout) && !errors.Is(err, a2a.ErrPeerClosed) {
				comm.Close()
				return fmt.Errorf("operation %d failed with %v, want a timeout", i, err)
			}
			fmt.Printf("rank %d: operation %d stopped %v after start: %v\n", rk.Rank, i, failedAt.Sub(start).Round(time.Millisecond), err)
			break
		}
		if time.Since(start) > time.Minute {
			comm.Close()
			return errors.New("no failure within a minute of the peer's death")
		}
	}
	if err := comm.Close(); err != nil {
		return fmt.Errorf("Close after the peer died: %w", err)
	}
	// Regroup: the survivors and a replacement for the dead rank.
	addr2 := os.Getenv(envAddr2)
	if rk.Rank == 0 {
		cmd := exec.Command(os.Args[0], testutil.ScenarioArgs()...)
		cmd.Env = append(append(os.Environ(), testutil.ScenarioEnv("replacement")...), launch.EnvRank+"="+strconv.Itoa(victim),
			launch.EnvWorld+"="+strconv.Itoa(rk.World), launch.EnvAddr+"="+addr2, launch.EnvSecret+"="+string(rk.Secret))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() {
			if err := cmd.Wait(); err != nil {
				fmt.Printf("FAIL replacement: %v\n", err)
				os.Exit(1)
			}
		}()
	}
	return workerReplacement(launch.Rank{Rank: rk.Rank, World: rk.World, Addr: addr2, Secret: rk.Secret})
}

// workerReplacement joins a fresh group and checks the collectives on it.
func workerReplacement(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	cs := smallCase(rk.World, a2a.BFloat16)
	comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, false, withMover(moverFromEnv()))
	if err != nil {
		return fmt.Errorf("regrouping: %w", err)
	}
	if err := check.Run(comm, cs, 11); err != nil {
		comm.Close()
		return fmt.Errorf("regrouped: %w", err)
	}
	fmt.Printf("rank %d: regrouped and checked\n", rk.Rank)
	return comm.Close()
}

func TestBarrierTimeout(t *testing.T) {
	requireGPU(t)
	runGroup(t, "timeout", 2, nil)
}

func TestKilledPeer(t *testing.T) {
	requireGPU(t)
	for _, m := range []a2a.Mover{a2a.MoverKernels, a2a.MoverCopyEngines} {
		t.Run(m.String(), func(t *testing.T) { killPeer(t, m) })
	}
}

// killPeer runs the killed-peer scenario with Comms of mover m.
func killPeer(t *testing.T, m a2a.Mover) {
	addr2, err := launch.FreeAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := launch.Run(ctx, launch.Spec{
		Exe: os.Args[0], Args: testutil.ScenarioArgs(), World: 3,
		Env:    append(testutil.ScenarioEnv("killed-peer"), envAddr2+"="+addr2, envMover+"="+m.String()),
		Output: testWriter{t}, Grace: 3 * time.Minute,
	})
	require.Error(t, err, "the victim must die")
	var exitErr *exec.ExitError
	require.ErrorAs(t, res[2].Err, &exitErr)
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "rank 2 ended with %v, want SIGKILL", res[2].Err)
	for _, r := range res[:2] {
		require.NoError(t, r.Err, "survivor rank %d", r.Rank)
		require.Contains(t, r.Output, "stopped")
		require.Contains(t, r.Output, "regrouped and checked")
	}
	require.Contains(t, res[0].Output, fmt.Sprintf("rank %d: regrouped and checked", 2), "the replacement's output goes through rank 0")
}

// workerMismatch: rank 0 runs SendRecvHeads while the others run AllGather
// of the same input (the same epoch); with a single buffer too. Every rank
// must get ErrOpMismatch, not a result, and close cleanly.
func workerMismatch(rk launch.Rank) error {
	return inBufferModes(rk, func(_ *exchange.TCP, comm *a2a.Comm, cs check.Case, _ bool) error {
		err := mismatchOn(comm, cs, rk.Rank)
		if cerr := comm.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("Close after the mismatch: %w", cerr)
		}
		return err
	})
}

// inBufferModes joins a group of rk's ranks on the small bf16 case, with a
// double and then a single buffer, and runs f on each Comm, which f
// closes (also on failure).
func inBufferModes(rk launch.Rank, f func(ex *exchange.TCP, comm *a2a.Comm, cs check.Case, single bool) error) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	for _, single := range []bool{false, true} {
		cs := smallCase(rk.World, a2a.BFloat16)
		comm, err := joinFor(rk, ex, a2a.BFloat16, []check.Case{cs}, single)
		if err != nil {
			return err
		}
		if err := f(ex, comm, cs, single); err != nil {
			return fmt.Errorf("single-buffer=%v: %w", single, err)
		}
	}
	return nil
}

func mismatchOn(comm *a2a.Comm, cs check.Case, rank int) error {
	if err := comm.SetTimeout(4 * time.Second); err != nil {
		return err
	}
	if err := check.Run(comm, cs, 1); err != nil {
		return err
	}
	dev := comm.Device()
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	if err := dev.Fill(x, 1); err != nil {
		return err
	}
	start := time.Now()
	if rank == 0 {
		_, err = comm.SendRecvHeads(x)
	} else {
		_, err = comm.AllGather(x)
	}
	if err == nil {
		err = comm.Sync()
	}
	fmt.Printf("rank %d: mismatched operation returned after %v: %v\n", rank, time.Since(start).Round(time.Millisecond), err)
	// A rank may find that a peer which saw the mismatch first has closed
	// already: that is an error too. No rank may get a result.
	var me *a2a.MismatchError
	if !errors.As(err, &me) && !errors.Is(err, a2a.ErrPeerClosed) {
		return fmt.Errorf("mismatched operations returned %v, want a *MismatchError or ErrPeerClosed", err)
	}
	if time.Since(start) > 2*time.Second {
		return fmt.Errorf("the mismatch took %v to report, want well under the timeout", time.Since(start))
	}
	if _, err := comm.AllGather(x); !errors.Is(err, a2a.ErrBroken) {
		return fmt.Errorf("operation after a mismatch returned %v, want ErrBroken", err)
	}
	return nil
}

// TestMismatchedOperations: see workerMismatch.
func TestMismatchedOperations(t *testing.T) {
	requireGPU(t)
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			res := runGroup(t, "mismatch", world, nil)
			// The first rank to look at a mismatched signal reports the
			// mismatch (the others may see its goodbye first).
			all := ""
			for _, r := range res {
				all += r.Output
			}
			require.Contains(t, all, "does not match")
		})
	}
}
