package exchange

import (
	"container/list"
	"net"
	"time"
)

// connTable is rank 0's table of the connections a round holds open: at
// most max at once. A connection that has not proved the secret may be
// evicted to make room for a newcomer, but only once it has had its
// grace: rank 0 counts a connection's time only while it waits on the
// connection, never while the connection waits on rank 0. So a
// connection is safe from admission until rank 0 starts reading its
// hello, for helloGrace while rank 0 waits for the hello, while rank 0
// answers it, and for proofGrace once the challenge is sent; a proven
// connection is never evicted. Once its grace is spent, a connection
// queues for eviction, in two lines by the time its wait began: those
// without a hello (silent, or stalled in it) go before those that were
// challenged. When none is due, a newcomer waits (admit says until when).
// Proven connections are at most P-1 (one per claimed rank) and max is at
// least P, so a full table always has one that is not. Every operation
// costs O(1); the caller holds the round's lock.
type connTable struct {
	max                    int
	helloGrace, proofGrace time.Duration
	open                   map[net.Conn]*connEntry
	hello                  list.List // of net.Conn waiting for their hello, by since
	proof                  list.List // of net.Conn waiting for their proof, by since
}

// A connection's graces, from TCPConfig.AuthTimeout (which bounds the
// hello and the proof together).
const (
	// maxHelloGrace bounds the wait for a hello. An honest peer sends its
	// hello with its first bytes, so rank 0 normally finds it in the
	// socket as it starts to read; one that has not come within this is
	// most likely a stranger's.
	maxHelloGrace = 10 * time.Millisecond
	// proofGraceShare is the share of AuthTimeout a challenged connection
	// gets for its proof: a round trip and the peer's work (one
	// HMAC-SHA256 to check rank 0's proof, one for its own).
	proofGraceShare = 4
)

// graces returns the hello and proof graces for an AuthTimeout: at most
// maxHelloGrace and a quarter of it, and a quarter of it.
func graces(authTimeout time.Duration) (hello, proof time.Duration) {
	proof = authTimeout / proofGraceShare
	return min(maxHelloGrace, proof), proof
}

// connEntry is where an open connection stands.
type connEntry struct {
	queue *list.List    // hello or proof; nil while rank 0 is busy with it, or once proven
	elem  *list.Element // its place in queue
	since time.Time     // when its wait in queue began
}

// newConnTable returns an empty table for at most max connections, with
// the graces above.
func newConnTable(max int, helloGrace, proofGrace time.Duration) *connTable {
	return &connTable{max: max, helloGrace: helloGrace, proofGrace: proofGrace, open: make(map[net.Conn]*connEntry)}
}

// admit registers c, which no one waits on yet, and reports ok. When the
// table is full it first removes the connection whose grace ended first,
// if one is due at now, and returns it as victim, with challenged set if
// rank 0 sent it a challenge (it may have sent its proof and blob). If
// none is due it changes nothing and returns !ok and when the next one
// will be (the zero time if none is waited on: a change will tell).
func (t *connTable) admit(c net.Conn, now time.Time) (victim net.Conn, challenged bool, next time.Time, ok bool) {
	if len(t.open) >= t.max {
		victim, challenged, next = t.due(now)
		if victim == nil {
			return nil, false, next, false
		}
		t.remove(victim)
	}
	t.open[c] = &connEntry{}
	return victim, challenged, time.Time{}, true
}

// due returns the connection to evict at now: the oldest of those waited
// on for their hello past helloGrace, or else of those waited on for
// their proof past proofGrace. With none, it returns when the first will
// be due (zero if no connection is waited on).
func (t *connTable) due(now time.Time) (victim net.Conn, challenged bool, next time.Time) {
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

// waitFor is what rank 0 waits for from a connection that has not
// proved the secret.
type waitFor int

const (
	waitNothing waitFor = iota // rank 0 is busy with it (or it is proven): it is safe
	waitHello                  // its hello; helloGrace
	waitProof                  // its proof, after the challenge; proofGrace
)

// await records that from now rank 0 waits on c for w, and reports false
// if c is no longer open (it was evicted).
func (t *connTable) await(c net.Conn, w waitFor, now time.Time) bool {
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
// waitNothing).
func (t *connTable) queue(w waitFor) *list.List {
	switch w {
	case waitHello:
		return &t.hello
	case waitProof:
		return &t.proof
	}
	return nil
}

// remove forgets c, and reports whether it was open.
func (t *connTable) remove(c net.Conn) bool {
	if !t.await(c, waitNothing, time.Time{}) {
		return false
	}
	delete(t.open, c)
	return true
}

// has reports whether c is open.
func (t *connTable) has(c net.Conn) bool { return t.open[c] != nil }

// len is the number of open connections.
func (t *connTable) len() int { return len(t.open) }
