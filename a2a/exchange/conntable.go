package exchange

import (
	"container/list"
	"net"
)

// connTable is rank 0's table of the connections a round holds open: at
// most max at once. Those that have not proved the secret queue by age,
// in two lines: fresh (no hello read yet) and greeted (a hello read, the
// proof awaited). When the table is full a newcomer takes the place of
// the oldest fresh connection, or failing that of the oldest greeted one:
// an honest peer sends its hello with its first bytes, so once rank 0 has
// read it only a stranger that speaks the protocol competes for its slot.
// Proven connections (at most P-1, one per claimed rank, and MaxConns >= P)
// are never evicted, so a full table always has one that is not.
// Every operation costs O(1); the caller holds the round's lock.
type connTable struct {
	max     int
	open    map[net.Conn]*connEntry
	fresh   list.List // of net.Conn, oldest first
	greeted list.List // of net.Conn, oldest first
}

// connEntry is where an open connection stands.
type connEntry struct {
	queue *list.List    // fresh or greeted; nil once proven
	elem  *list.Element // its place in queue
}

// newConnTable returns an empty table for at most max connections.
func newConnTable(max int) *connTable {
	return &connTable{max: max, open: make(map[net.Conn]*connEntry)}
}

// add registers c as fresh. When the table is full it first removes the
// oldest connection that has not proved the secret and returns it as
// victim, with greeted set if that one had sent its hello (it may have
// been challenged); ok is false, and nothing changes, if every open
// connection has proved the secret.
func (t *connTable) add(c net.Conn) (victim net.Conn, greeted, ok bool) {
	if len(t.open) >= t.max {
		q := &t.fresh
		if q.Len() == 0 {
			q = &t.greeted
		}
		front := q.Front()
		if front == nil {
			return nil, false, false
		}
		victim, greeted = front.Value.(net.Conn), q == &t.greeted
		t.remove(victim)
	}
	t.open[c] = &connEntry{queue: &t.fresh, elem: t.fresh.PushBack(c)}
	return victim, greeted, true
}

// greet moves c from fresh to greeted (its hello is read), keeping its
// age, and reports false if c is no longer open (it was evicted).
func (t *connTable) greet(c net.Conn) bool {
	e := t.open[c]
	if e == nil {
		return false
	}
	if e.queue == &t.fresh {
		e.queue.Remove(e.elem)
		e.queue, e.elem = &t.greeted, t.greeted.PushBack(c)
	}
	return true
}

// prove takes c out of the queues for good (it proved the secret), and
// reports false if c is no longer open.
func (t *connTable) prove(c net.Conn) bool {
	e := t.open[c]
	if e == nil {
		return false
	}
	if e.queue != nil {
		e.queue.Remove(e.elem)
		e.queue, e.elem = nil, nil
	}
	return true
}

// remove forgets c, and reports whether it was open.
func (t *connTable) remove(c net.Conn) bool {
	if !t.prove(c) {
		return false
	}
	delete(t.open, c)
	return true
}

// has reports whether c is open.
func (t *connTable) has(c net.Conn) bool { return t.open[c] != nil }

// len is the number of open connections.
func (t *connTable) len() int { return len(t.open) }
