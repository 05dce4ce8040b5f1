package device

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Loading a module waits for every kernel on the device (docs/DESIGN.md,
// "What waits for what"), so a family of PTX loaded on first use (the
// path of a GPU without machine code) is loaded only when no Comm of the
// process there has work queued, under the launch gate, as the graveyard
// is released.
//
// Waiting for such a moment alone can wait forever: two Comms that enqueue
// one operation after another are never idle together. So a load takes
// windows. In each it holds back every new operation of the share's Comms
// (the enqueue gate, which each Comm holds shared while it enqueues, taken
// only between two enqueues and never waited for) and waits for the
// queued ones to end; if they do, it loads. If not (a queued kernel waits
// for a peer that is held back in its own process), it lets the operations
// go for a while, so that no two processes hold each other back past a
// window, and tries again with a longer window, for at most the caller's
// timeout. The first operation of a kind on such a GPU therefore waits for
// the process's queued operations on the device, and each window delays
// the process's other operations by at most its length.

const (
	// loadPause bounds the sleep between two looks at the members' streams.
	loadPause = time.Millisecond
	// loadWindowMin and loadWindowMax bound a load's window: the first
	// is short (queued operations usually end within microseconds of
	// their peers' launch), each next one twice as long.
	loadWindowMin = 2 * time.Millisecond
	loadWindowMax = 64 * time.Millisecond
)

// load loads the family of m's entry i once no member of s has work
// queued, waiting for at most timeout; loads are made one at a time.
func (s *Share) load(m *moduleSet, i int, timeout time.Duration) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if m.fns[i].Load() != 0 {
		return nil // loaded while this caller waited for loadMu
	}
	fam := m.famOf[i]
	deadline := time.Now().Add(timeout)
	for window := loadWindowMin; ; window = min(2*window, loadWindowMax) {
		if loaded, err := s.loadWithin(m, fam, min(window, time.Until(deadline))); loaded {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("a2a: loading the %s kernels of %s (PTX, compiled by the driver) waited %v for the operations this process had queued on GPU %d: %w",
				m.fams[fam], m.file.Name, timeout, s.Ordinal, api.ErrTimeout)
		}
		// The held-back operations run now: a peer's kernel may be
		// waiting for them. Randomized, so that two processes loading at
		// once do not keep holding each other back in step.
		time.Sleep(min(window/2+rand.N(window/2), time.Until(deadline)))
	}
}

// loadWithin holds back new operations of s's Comms and waits, for at
// most window, until none has work queued; then it loads family fam of m
// under the launch gate. It reports whether it loaded (and the load's
// error).
func (s *Share) loadWithin(m *moduleSet, fam int, window time.Duration) (loaded bool, err error) {
	end := time.Now().Add(window)
	pause := 20 * time.Microsecond
	held := false
	defer func() {
		if held {
			s.enqueues.Unlock()
		}
	}()
	for {
		if !held {
			// Never Lock: a waiting writer would stall every new
			// RLock, and a graph's launch takes one for each of its
			// Comms, several on one share.
			held = s.enqueues.TryLock()
		}
		if held {
			s.Gate.Lock()
			if s.allIdle() {
				err := m.loadFamily(fam)
				s.Gate.Unlock()
				return true, err
			}
			s.Gate.Unlock()
		}
		if time.Now().After(end) {
			return false, nil
		}
		time.Sleep(pause)
		pause = min(2*pause, loadPause)
	}
}

// BeginEnqueue is called by a Comm of s before it enqueues an operation
// (before it sets its member's Enqueuing), EndEnqueue once the operation's
// end is marked. Where s loads PTX on first use they hold the enqueue gate
// shared, so that a load can hold new operations back while it waits for
// the queued ones; elsewhere they do nothing. Allocation-free.
func (s *Share) BeginEnqueue() {
	if s.lazy {
		s.enqueues.RLock()
	}
}

// EndEnqueue ends what BeginEnqueue began.
func (s *Share) EndEnqueue() {
	if s.lazy {
		s.enqueues.RUnlock()
	}
}
