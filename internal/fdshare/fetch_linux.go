package fdshare

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Backoff between the tries of one Fetch: doubling from the first to the
// last, each drawn between half and all of it.
const (
	firstBackoff = time.Millisecond
	maxBackoff   = 32 * time.Millisecond
)

// Fetch dials the socket of the buffer keyed key in dir (a handle's
// FDDir, checked first: see socketPath), proves the key, and returns the
// descriptor its owner hands over, which the caller must close, with the
// size of the allocation mapped (to be checked: the import and the mapping
// are the proof). The owner must claim exactly want. A try that a crowd
// of strangers spoils (a full listen queue, a connection closed before
// the proof) is made again with backoff until deadline; anything else
// ends it at once. Every failure matches api.ErrShare, says what the
// tries met, and leaves no descriptor open.
func Fetch(dir string, key []byte, want Claim, deadline time.Time) (fd int, size uint64, err error) {
	path, err := socketPath(dir, key)
	if err != nil {
		return -1, 0, err
	}
	var met []string
	for wait := firstBackoff; ; wait = min(2*wait, maxBackoff) {
		fd, size, err := fetchOnce(path, key, want, deadline)
		var again *retryable
		if err == nil || !errors.As(err, &again) {
			return fd, size, triesSaid(err, met)
		}
		met = append(met, again.what)
		pause := wait/2 + rand.N(wait/2+1)
		if time.Until(deadline) < pause {
			return -1, 0, fmt.Errorf("a2a: gave up fetching the buffer's descriptor at the deadline after %s (%s): last: %v: %w",
				tries(len(met)), tally(met), err, api.ErrShare)
		}
		time.Sleep(pause)
	}
}

// retryable is a try that strangers may have spoiled: what it met.
type retryable struct {
	what string
	err  error
}

func (r *retryable) Error() string { return r.what + ": " + r.err.Error() }

// again is a retryable failure.
func again(what string, err error) error { return &retryable{what: what, err: err} }

// fetchOnce is one try: dial, hello, the owner's proof, this peer's,
// the give.
func fetchOnce(path string, key []byte, want Claim, deadline time.Time) (int, uint64, error) {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("unix", path)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return -1, 0, again("the listen queue was full", err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return -1, 0, shareError("dialing the owner's socket (no process listens: did its owner die?)", err)
	case errors.Is(err, os.ErrNotExist):
		return -1, 0, shareError("dialing the owner's socket (gone: its owner closed its Comm or died)", err)
	case err != nil:
		return -1, 0, shareError("dialing the owner's socket", err)
	}
	c := conn.(*net.UnixConn)
	defer c.Close()
	if err := c.SetDeadline(deadline); err != nil {
		return -1, 0, shareError("setting the deadline", err)
	}
	if !sameUser(c) {
		return -1, 0, fmt.Errorf("a2a: the buffer's socket is held by a process of another user: %w", api.ErrShare)
	}
	ss := session{key: key, peer: newNonce()}
	if _, err := c.Write(hello(ss.peer)); err != nil {
		return -1, 0, closedOr("closed before the hello", "sending the hello", err)
	}
	var ch [challengeSize]byte
	if _, err := io.ReadFull(c, ch[:]); err != nil {
		return -1, 0, closedOr("closed before the challenge", "reading the owner's challenge", err)
	}
	copy(ss.server[:], ch[:nonceSize])
	if !ss.verify(labelProof, nil, ch[nonceSize:]) {
		return -1, 0, fmt.Errorf("a2a: the buffer's socket does not prove the group's key: %w", api.ErrShare)
	}
	if _, err := c.Write(ss.mac(labelAuth, nil)); err != nil {
		return -1, 0, closedOr("closed before the proof", "sending the proof", err)
	}
	return receive(c, &ss, want)
}

// closedOr is a retryable what where the owner closed the connection
// (it made room for a newcomer, or died, which the next dial tells), and
// a failure while doing otherwise (the deadline, say).
func closedOr(what, doing string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return again(what, err)
	}
	return shareError(doing, err)
}

// triesSaid adds to a final error what the earlier tries met.
func triesSaid(err error, met []string) error {
	if err == nil || len(met) == 0 {
		return err
	}
	return fmt.Errorf("%w (after %s that met: %s)", err, tries(len(met)), tally(met))
}

// tries is "1 try" or "n tries".
func tries(n int) string {
	if n == 1 {
		return "1 try"
	}
	return fmt.Sprintf("%d tries", n)
}

// tally counts what the tries met, in the order first met: "3 x closed
// before the challenge, 1 x the listen queue was full".
func tally(met []string) string {
	n := map[string]int{}
	var order []string
	for _, m := range met {
		if n[m] == 0 {
			order = append(order, m)
		}
		n[m]++
	}
	s := ""
	for i, m := range order {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d x %s", n[m], m)
	}
	return s
}
