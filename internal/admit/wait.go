package admit

import "time"

// Room is how a server's accept loop, holding a newcomer that found the
// Table full, learns that it may try again: the connections' goroutines
// signal it when a grace begins or a connection leaves. Make one with
// NewRoom.
type Room chan struct{}

// NewRoom returns a Room that holds one signal.
func NewRoom() Room { return make(Room, 1) }

// Changed signals the room without blocking (a signal already waiting
// stands for this one too).
func (r Room) Changed() {
	select {
	case r <- struct{}{}:
	default:
	}
}

// Wait waits until next (if not zero: Table.Admit's when) or a change,
// and reports false if stop closed first.
func (r Room) Wait(next time.Time, stop <-chan struct{}) bool {
	var due <-chan time.Time
	if !next.IsZero() {
		t := time.NewTimer(time.Until(next))
		defer t.Stop()
		due = t.C
	}
	select {
	case <-due:
	case <-r:
	case <-stop:
		return false
	}
	return true
}
