package device

import (
	"math/rand/v2"
	"time"
)

// Some calls must run when no Comm of the process on the device has work
// queued (share.go): a module load and the graveyard's releases. Waiting
// for such a moment alone can wait forever: Comms that enqueue one
// operation after another are never idle together. So such a call takes
// windows. In each it holds back every new operation of the share's Comms
// (the enqueue gate, which each Comm holds shared while it enqueues, taken
// only between two enqueues and never waited for) and waits for the
// queued ones to end; if they do, it runs. If not (a queued kernel waits
// for a peer that is held back in its own process), it lets the operations
// go for a while, so that no two processes hold each other back past a
// window, and tries again with a longer window. Each window delays the
// process's other operations by at most its length.

const (
	// idlePause bounds the sleep between two looks at the members' streams.
	idlePause = time.Millisecond
	// windowMin and windowMax bound a window: the first is short (queued
	// operations usually end within microseconds of their peers'
	// launch), each next one twice as long.
	windowMin = 2 * time.Millisecond
	windowMax = 64 * time.Millisecond
)

// inWindows calls within with windows from windowMin doubling to
// windowMax until it reports that it ran, and after each failed window
// calls pause with a randomized time for the held-back operations to run
// (randomized, so that two processes do not keep holding each other back
// in step); pause reports whether to go on. It reports whether within
// ran.
func inWindows(within func(window time.Duration) bool, pause func(time.Duration) bool) bool {
	for window := windowMin; ; window = min(2*window, windowMax) {
		if within(window) {
			return true
		}
		if !pause(window/2 + rand.N(window/2)) {
			return false
		}
	}
}

// whenIdle holds back new operations of s's Comms and waits, for at most
// window, until none has work queued; then it calls f (ifIdle). It
// reports whether f ran.
func (s *Share) whenIdle(window time.Duration, f func()) bool {
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
		if held && s.ifIdle(f) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, idlePause)
	}
}

// BeginEnqueue is called by a Comm of s before it enqueues an operation
// (before it sets its member's Enqueuing), EndEnqueue once the operation's
// end is marked: they hold the enqueue gate shared, so that a load or a
// release can hold new operations back while it waits for the queued
// ones. Allocation-free.
func (s *Share) BeginEnqueue() { s.enqueues.RLock() }

// EndEnqueue ends what BeginEnqueue began.
func (s *Share) EndEnqueue() { s.enqueues.RUnlock() }
