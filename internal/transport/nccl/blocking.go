package nccl

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
)

// LaunchBlocking's communicator (Tuning.Launch): split from the
// non-blocking one at the first operation, connected to every rank
// there, its blocking calls run under a watchdog.

// allocProbe refuses LaunchBlocking where the loaded NCCL cannot split
// (ErrNotSupported) and allocates the bytes its connecting group moves.
func (t *Transport) allocProbe() error {
	if t.tuning.Launch != LaunchBlocking {
		return nil
	}
	if !t.lib.Has(binding.FeatureSplit) {
		return fmt.Errorf("a2a: the blocking NCCL launch needs ncclCommSplit (NCCL 2.18), which %s (NCCL %d) lacks: %w", t.lib.Path(), t.lib.Version(), api.ErrNotSupported)
	}
	p, err := t.env.Ctx.MemAlloc(uint64(1 + t.env.World))
	if err != nil {
		return api.WrapDriver("allocating the NCCL connecting bytes", err)
	}
	t.probe = p
	return nil
}

// wantChild reports, with mu held, whether settle is to make the
// blocking communicator now: LaunchBlocking, not made yet, the
// communicator healthy, and groups to launch (a world of one without
// Tuning.Self sends nothing).
func (t *Transport) wantChild() bool {
	return t.tuning.Launch == LaunchBlocking && t.child == nil && t.comm != nil && t.failed == nil &&
		(t.env.World > 1 || t.tuning.Self)
}

// openChild, with mu held and the communicator ready, splits it into the
// blocking one (a collective that the non-blocking parent runs as its own
// job: polled as its init is) and connects that to every rank with one
// group of a byte to and from each (a blocking launch connects to a peer
// at its first transfer with it, waiting for the peer to do the same),
// all by deadline. It returns the failure.
func (t *Transport) openChild(deadline time.Time) error {
	child, err := t.comm.Split(binding.CommOptions{Blocking: true})
	if err != nil {
		t.failLocked(api.WrapNCCL("splitting the blocking NCCL communicator off", err))
		return t.failed
	}
	t.child, t.settling = child, true
	t.dog = newWatchdog(child, t.comm)
	if err := t.settleBy(deadline); err != nil {
		return err
	}
	err = t.guarded(deadline, func() error {
		if err := t.lib.GroupStart(); err != nil {
			return err
		}
		var err error
		for p := range t.env.World {
			if err == nil {
				err = t.child.Send(uintptr(t.probe), 1, binding.Uint8, p, uintptr(t.env.Stream))
			}
			if err == nil {
				err = t.child.Recv(uintptr(t.probe)+uintptr(1+p), 1, binding.Uint8, p, uintptr(t.env.Stream))
			}
		}
		if end := t.lib.GroupEnd(); err == nil { // always: the thread's group must close
			err = end
		}
		return err
	})
	if err != nil && t.failed == nil {
		t.failLocked(api.WrapNCCL("connecting the blocking NCCL communicator", err))
	}
	return t.failed
}

// watchdog aborts the child and the parent from its timer's goroutine
// (ncclCommAbort from another thread, which ends a blocking call) once
// armed past a deadline: one timer for the blocking communicator's life,
// armed and stopped around each blocking call. It fires at most once:
// both communicators are gone then.
type watchdog struct {
	timer *time.Timer
	fired chan struct{} // closed once the aborts are done
}

func newWatchdog(child, parent *binding.Comm) *watchdog {
	w := &watchdog{fired: make(chan struct{})}
	w.timer = time.AfterFunc(time.Hour, func() {
		_ = child.Abort()
		_ = parent.Abort()
		close(w.fired)
	})
	w.timer.Stop() // armed by guarded only
	return w
}

// guarded runs f, a blocking call on the child, with mu held, under the
// watchdog: if f has not returned by deadline, the watchdog aborts the
// child and the parent, and the failure is a *TimeoutError. It returns
// f's error or that failure. It allocates nothing.
func (t *Transport) guarded(deadline time.Time, f func() error) error {
	t.dog.timer.Reset(time.Until(deadline))
	err := f()
	if t.dog.timer.Stop() {
		return err
	}
	<-t.dog.fired
	t.child, t.comm = nil, nil // aborted by the watchdog
	t.failLocked(&api.TimeoutError{Rank: t.env.Rank, Peer: -1, Phase: api.PhaseStart, Epoch: t.ops.Load(), Timeout: time.Duration(t.timeout.Load())})
	return t.failed
}

// endGroup closes the thread's group (ncclGroupEnd): on the blocking
// communicator under the watchdog, bounded by the timeout from now.
func (t *Transport) endGroup() error {
	if t.child == nil {
		return t.lib.GroupEnd()
	}
	return t.guarded(time.Now().Add(time.Duration(t.timeout.Load())), t.lib.GroupEnd)
}
