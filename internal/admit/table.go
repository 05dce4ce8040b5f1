// Package admit decides which connections a server that authenticates
// its clients keeps open when strangers crowd it: a table of bounded size
// where an unproven connection gets a short grace and a proven one is
// never evicted. The TCP exchange's rank 0 and the file-descriptor
// server use it; docs/DESIGN.md, "Admission", states the rule.
package admit

import (
	"container/list"
	"iter"
	"maps"
	"net"
	"time"
)

// Table is a server's table of the connections it holds open: at most
// max at once. A connection that has not proved the key may be evicted
// to make room for a newcomer, but only once it has had its grace: the
// server counts a connection's time only while it waits on the
// connection, never while the connection waits on the server. So a
// connection is safe from admission until the server starts reading its
// hello, for helloGrace while the server waits for the hello, while it
// answers it, and for proofGrace once the challenge is sent; a proven
// connection is never evicted. Once its grace is spent, a connection
// queues for eviction, in two lines by the time its wait began: those
// without a hello (silent, or stalled in it) go before those that were
// challenged. When none is due, a newcomer waits (Admit says until when).
// The caller keeps the proven connections fewer than max, so that a full
// table always has one that is not. Every operation costs O(1); the
// caller serialises them.
type Table struct {
	max                    int
	helloGrace, proofGrace time.Duration
	open                   map[net.Conn]*entry
	hello                  list.List // of net.Conn waiting for their hello, by since
	proof                  list.List // of net.Conn waiting for their proof, by since
}

// entry is where an open connection stands.
type entry struct {
	queue *list.List    // hello or proof; nil while the server is busy with it, or once proven
	elem  *list.Element // its place in queue
	since time.Time     // when its wait in queue began
}

// New returns an empty table for at most max connections, whose
// unproven connections get helloGrace for their hello and proofGrace for
// their proof.
func New(max int, helloGrace, proofGrace time.Duration) *Table {
	return &Table{max: max, helloGrace: helloGrace, proofGrace: proofGrace, open: make(map[net.Conn]*entry)}
}

// Admit registers c, which no one waits on yet, and reports ok. When the
// table is full it first removes the connection whose grace ended first,
// if one is due at now, and returns it as victim, with challenged set if
// the server sent it a challenge (it may have sent its proof). If
// none is due it changes nothing and returns !ok and when the next one
// will be (the zero time if none is waited on: a change will tell).
func (t *Table) Admit(c net.Conn, now time.Time) (victim net.Conn, challenged bool, next time.Time, ok bool) {
	if len(t.open) >= t.max {
		victim, challenged, next = t.due(now)
		if victim == nil {
			return nil, false, next, false
		}
		t.Remove(victim)
	}
	t.open[c] = &entry{}
	return victim, challenged, time.Time{}, true
}

// due returns the connection to evict at now: the oldest of those waited
// on for their hello past helloGrace, or else of those waited on for
// their proof past proofGrace. With none, it returns when the first will
// be due (zero if no connection is waited on).
func (t *Table) due(now time.Time) (victim net.Conn, challenged bool, next time.Time) {
	for _, q := range []struct {
		l     *list.List
		grace time.Duration
	}{{&t.hello, t.helloGrace}, {&t.proof, t.proofGrace}} {
		front := q.l.Front()
		if front == nil {
			continue
		}
		c := front.Value.(net.Conn)
		at := t.open[c].since.Add(q.grace)
		if !now.Before(at) {
			return c, q.l == &t.proof, time.Time{}
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return nil, false, next
}

// Wait is what the server waits for from a connection that has not
// proved the key.
type Wait int

const (
	Nothing Wait = iota // the server is busy with it (or it is proven): it is safe
	Hello               // its hello; helloGrace
	Proof               // its proof, after the challenge; proofGrace
)

// Await records that from now the server waits on c for w, and reports false
// if c is no longer open (it was evicted).
func (t *Table) Await(c net.Conn, w Wait, now time.Time) bool {
	e := t.open[c]
	if e == nil {
		return false
	}
	if e.queue != nil {
		e.queue.Remove(e.elem)
		e.queue, e.elem = nil, nil
	}
	if q := t.queue(w); q != nil {
		e.queue, e.elem, e.since = q, q.PushBack(c), now
	}
	return true
}

// queue is the line of the connections waited on for w (nil for
// Nothing).
func (t *Table) queue(w Wait) *list.List {
	switch w {
	case Hello:
		return &t.hello
	case Proof:
		return &t.proof
	}
	return nil
}

// Remove forgets c, and reports whether it was open.
func (t *Table) Remove(c net.Conn) bool {
	if !t.Await(c, Nothing, time.Time{}) {
		return false
	}
	delete(t.open, c)
	return true
}

// Has reports whether c is open.
func (t *Table) Has(c net.Conn) bool { return t.open[c] != nil }

// Len is the number of open connections.
func (t *Table) Len() int { return len(t.open) }

// All yields every open connection, in no order; Remove may be called
// from the loop.
func (t *Table) All() iter.Seq[net.Conn] { return maps.Keys(t.open) }
