package a2a

import (
	"runtime"
	"time"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/nccl"
)

// devicePoller is a transport whose operations cannot bound their own
// waits (NCCL): the Comm's waits poll it instead of blocking in the
// driver.
type devicePoller interface {
	// poll waits for the Comm's operations (the stream, or the event tail
	// when the last ran on a caller's stream) and returns a driver error;
	// a failure of the transport (timeout, abort, NCCL's error) is left
	// for failure to report, and the wait returns nil.
	poll(onCaller bool, tail driver.Event) error
}

// Polling: spinPolls polls back to back (yielding the processor), then
// sleeps doubling from pollMin to pollMax between polls: a wait of a
// short operation costs microseconds, a long one at most pollMax of
// latency, and each poll is one cuStreamQuery (or cuEventQuery) and one
// ncclCommGetAsyncError.
const (
	spinPolls = 64
	pollMin   = 10 * time.Microsecond
	pollMax   = time.Millisecond
)

// poll waits until the work is done and the communicator has nothing in
// progress, polling against a deadline: the last operation's enqueue
// time plus the timeout (a later enqueue moves it). Past the deadline,
// or when abort was asked, or when NCCL reports a failure, it aborts the
// communicator (ncclCommAbort, which ends its kernels and leaves the
// CUDA context usable) and records the failure: a *TimeoutError, an
// *abortedError or NCCL's error.
func (t *ncclTransport) poll(onCaller bool, tail driver.Event) error {
	sleep := time.Duration(0)
	for i := 0; ; i++ {
		if how := t.abortAsk.Load(); how != 0 {
			t.fail(&abortedError{Rank: t.rank, Peer: -1, Phase: PhaseEnd, Epoch: t.ops.Load(), ByClose: how == abortByClose})
			return nil
		}
		var done bool
		var err error
		if onCaller {
			done, err = t.dev.ctx.EventDone(tail)
		} else {
			done, err = t.dev.ctx.StreamDone(t.stream)
		}
		if err != nil {
			return err
		}
		state, broken := t.state()
		switch {
		case broken:
			return nil
		case state != nccl.InProgress && state != nccl.Success:
			t.fail(wrapNCCL("the NCCL communicator failed", &nccl.Error{Call: "ncclCommGetAsyncError", Code: state, Text: "asynchronous error"}))
			return nil
		case done && state == nccl.Success:
			return nil
		case time.Now().UnixNano() > t.lastEnqueue.Load()+t.timeout.Load():
			t.fail(&TimeoutError{Rank: t.rank, Peer: -1, Phase: PhaseEnd, Epoch: t.ops.Load(), Timeout: time.Duration(t.timeout.Load())})
			return nil
		}
		if i < spinPolls {
			runtime.Gosched()
			continue
		}
		sleep = min(max(2*sleep, pollMin), pollMax)
		time.Sleep(sleep)
	}
}

// state is the communicator's asynchronous state, and whether it is
// already broken (aborted, failed or released): then there is nothing to
// wait for.
func (t *ncclTransport) state() (nccl.Result, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.comm == nil || t.failed != nil {
		return 0, true
	}
	r, err := t.comm.AsyncError()
	if err != nil {
		t.failLocked(wrapNCCL("asking the NCCL communicator's state", err))
		return 0, true
	}
	if r == nccl.Success {
		t.settling = false
	}
	return r, false
}

// fail records err as the transport's failure, if it is the first, and
// aborts the communicator.
func (t *ncclTransport) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failLocked(err)
}

func (t *ncclTransport) failLocked(err error) {
	if t.failed == nil {
		t.failed = err
	}
	if t.comm != nil {
		_ = t.comm.Abort()
		t.comm = nil
	}
}

// settle waits, with mu held, until NCCL's non-blocking init or last
// group has finished setting up (NCCL's rule before the next call on the
// communicator), bounded by the timeout from now; past it, or on NCCL's
// error, the communicator fails as poll says. It returns the failure.
func (t *ncclTransport) settle() error {
	deadline := time.Now().Add(time.Duration(t.timeout.Load()))
	sleep := time.Duration(0)
	for i := 0; t.settling; i++ {
		if t.failed != nil || t.comm == nil {
			break
		}
		r, err := t.comm.AsyncError()
		switch {
		case err != nil:
			t.failLocked(wrapNCCL("asking the NCCL communicator's state", err))
		case r == nccl.Success:
			t.settling = false
		case r != nccl.InProgress:
			t.failLocked(wrapNCCL("the NCCL communicator failed", &nccl.Error{Call: "ncclCommGetAsyncError", Code: r, Text: "asynchronous error"}))
		case time.Now().After(deadline):
			t.failLocked(&TimeoutError{Rank: t.rank, Peer: -1, Phase: PhaseStart, Epoch: t.ops.Load(), Timeout: time.Duration(t.timeout.Load())})
		case i >= spinPolls:
			sleep = min(max(2*sleep, pollMin), pollMax)
			t.mu.Unlock()
			time.Sleep(sleep)
			t.mu.Lock()
		}
	}
	if t.failed == nil && t.comm == nil {
		return prefixed(ErrClosed)
	}
	return t.failed
}
