package nccl

import (
	"runtime"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
)

// Polling: for spinFor a poller polls back to back (yielding the
// processor between polls), then sleeps doubling from pollMin to pollMax:
// a wait of a short operation costs microseconds, a long one at most
// pollMax of latency. Each poll of a wait is one cuStreamQuery (or
// cuEventQuery) and one ncclCommGetAsyncError.
const (
	spinFor = 200 * time.Microsecond
	pollMin = 10 * time.Microsecond
	pollMax = time.Millisecond
)

// backoff paces a polling loop: pause yields the processor while the
// first spinFor lasts, then sleeps, longer each time.
type backoff struct {
	start time.Time
	sleep time.Duration
}

func newBackoff() backoff { return backoff{start: time.Now()} }

// pause waits before the next poll; unlock and lock, when not nil, are
// called around a sleep (a lock the poller holds that others need).
func (b *backoff) pause(unlock, lock func()) {
	if time.Since(b.start) < spinFor {
		runtime.Gosched()
		return
	}
	b.sleep = min(max(2*b.sleep, pollMin), pollMax)
	if unlock != nil {
		unlock()
		defer lock()
	}
	time.Sleep(b.sleep)
}

// Wait polls until the work is done and the communicator has nothing in
// progress (NCCL has no timeout of its own to bound a blocking Wait),
// against a deadline: the last operation's enqueue
// time plus the timeout (a later enqueue moves it). Past the deadline,
// or when abort was asked, or when NCCL reports a failure, it aborts the
// communicator (ncclCommAbort, which ends its kernels and leaves the
// CUDA context usable) and records the failure: a *TimeoutError, an
// *api.AbortedError or NCCL's error.
func (t *Transport) Wait(onCaller bool, tail driver.Event) error {
	b := newBackoff()
	for {
		if how := t.abortAsk.Load(); how != 0 {
			t.fail(&api.AbortedError{Rank: t.env.Rank, Peer: -1, Phase: api.PhaseEnd, Epoch: t.ops.Load(), ByClose: how == abortByClose})
			return nil
		}
		var done bool
		var err error
		if onCaller {
			done, err = t.env.Ctx.EventDone(tail)
		} else {
			done, err = t.env.Ctx.StreamDone(t.env.Stream)
		}
		if err != nil {
			return err
		}
		state, broken := t.state()
		switch {
		case broken:
			return nil
		case done && state == binding.Success:
			return nil
		case time.Now().UnixNano() > t.lastEnqueue.Load()+t.timeout.Load():
			t.fail(&api.TimeoutError{Rank: t.env.Rank, Peer: -1, Phase: api.PhaseEnd, Epoch: t.ops.Load(), Timeout: time.Duration(t.timeout.Load())})
			return nil
		}
		b.pause(nil, nil)
	}
}

// state is the communicator's asynchronous state, and whether it is
// broken (aborted, failed or released, or failing now: the failure is
// recorded): then there is nothing to wait for.
func (t *Transport) state() (binding.Result, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked()
}

// stateLocked is state with mu held: of both communicators where
// LaunchBlocking has split the blocking one off, in progress while
// either is.
func (t *Transport) stateLocked() (binding.Result, bool) {
	if t.comm == nil || t.failed != nil {
		return 0, true
	}
	state := binding.Success
	for _, c := range [2]*binding.Comm{t.comm, t.child} {
		if c == nil {
			continue
		}
		r, err := c.AsyncError()
		if err != nil {
			t.failLocked(api.WrapNCCL("asking the NCCL communicator's state", err))
			return 0, true
		}
		switch r {
		case binding.Success:
		case binding.InProgress:
			state = r
		default:
			t.failLocked(api.WrapNCCL("the NCCL communicator failed", c.Failure(r)))
			return r, true
		}
	}
	if state == binding.Success {
		t.settling = false
	}
	return state, false
}

// fail records err as the transport's failure, if it is the first, and
// aborts the communicator.
func (t *Transport) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failLocked(err)
}

func (t *Transport) failLocked(err error) {
	if t.failed == nil {
		t.failed = err
	}
	if t.child != nil { // before its parent
		_ = t.child.Abort()
		t.child = nil
	}
	if t.comm != nil {
		_ = t.comm.Abort()
		t.comm = nil
	}
}

// settle waits, with mu held, until NCCL's non-blocking init or last
// group has finished setting up (NCCL's rule before the next call on the
// communicator), bounded by the timeout from now; past it, or on NCCL's
// error, the communicator fails as poll says. With LaunchBlocking, the
// first time the communicator is ready it also makes the blocking one
// (openChild), within the same bound. It returns the failure.
func (t *Transport) settle() error {
	deadline := time.Now().Add(time.Duration(t.timeout.Load()))
	if err := t.settleBy(deadline); err != nil || !t.wantChild() {
		return err
	}
	return t.openChild(deadline)
}

// settleBy is settle's wait, until deadline.
func (t *Transport) settleBy(deadline time.Time) error {
	b := newBackoff()
	for t.settling {
		if _, broken := t.stateLocked(); broken || !t.settling {
			break
		}
		if time.Now().After(deadline) { // still in progress
			t.failLocked(&api.TimeoutError{Rank: t.env.Rank, Peer: -1, Phase: api.PhaseStart, Epoch: t.ops.Load(), Timeout: time.Duration(t.timeout.Load())})
			break
		}
		b.pause(t.mu.Unlock, t.mu.Lock)
	}
	if t.failed == nil && t.comm == nil {
		return api.Prefixed(api.ErrClosed)
	}
	return t.failed
}

// Goodbye has no one to tell: NCCL writes only into receives this rank
// posted, so peers need no word before it frees its buffer. With wait it
// waits for the queued operations as a Sync does (bounded, aborting past
// the deadline), so that Close's own wait for the stream that follows
// cannot hang on a peer that never came.
func (t *Transport) Goodbye(wait bool) error {
	if !wait {
		return nil
	}
	return t.Wait(false, 0)
}
