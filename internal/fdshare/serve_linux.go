package fdshare

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/ulysses-go/ulysses/internal/admit"
)

// acceptLoop admits connections until Close. Another user's cannot reach
// the socket through its directory; one that does all the same is closed
// before it takes a place.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !s.pause(10*time.Millisecond) {
				return
			}
			continue // out of descriptors, say: let it pass
		}
		if !sameUser(c) {
			s.count(func(st *Stats) { st.Strangers++ })
			c.Close()
			continue
		}
		if !s.admit(c) {
			c.Close()
			return
		}
	}
}

// admit registers c and starts its serve goroutine, and reports true.
// With MaxConns open it first evicts one that has not proved the key and
// has had its grace (admit.Table.Admit), or waits, holding c, until one
// has; meanwhile newer connections wait in the listen queue, in the order
// they came. It reports false once Close has begun.
func (s *Server) admit(c *net.UnixConn) bool {
	select {
	case s.live <- struct{}{}: // waits only while evicted goroutines exit
	case <-s.stop:
		return false
	}
	for {
		next, ok, closed := s.register(c)
		if ok {
			go s.serve(c)
			return true
		}
		if closed || !s.changed.Wait(next, s.stop) {
			<-s.live
			return false
		}
	}
}

// register adds c to the table, closing the connection evicted for it,
// or reports !ok and when to try again (or closed, once Close has begun).
func (s *Server) register(c *net.UnixConn) (next time.Time, ok, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, false, true
	}
	victim, _, next, ok := s.table.Admit(c, time.Now())
	if !ok {
		s.stats.Waits++
		return next, false, false
	}
	if victim != nil {
		victim.Close() // its serve goroutine fails its read and leaves
		s.stats.Evicted++
	}
	s.wg.Add(1)
	return time.Time{}, true, false
}

// serve runs the owner's side of one connection; any misstep of the peer
// ends it without an answer.
func (s *Server) serve(c *net.UnixConn) {
	defer s.wg.Done()
	defer func() { s.leave(c); <-s.live }()
	deadline := time.Now().Add(s.cfg.Timeout)
	if c.SetDeadline(deadline) != nil {
		return
	}
	if ss, ok := s.handshake(c); ok {
		s.give(c, ss)
	}
}

// handshake reads the hello, proves the key and checks the peer's proof,
// telling the table what it waits for at each step; it reports the
// session of a peer that proved the key, which is never evicted.
func (s *Server) handshake(c *net.UnixConn) (*session, bool) {
	var in [helloSize]byte
	if !s.await(c, admit.Hello) {
		return nil, false
	}
	if _, err := io.ReadFull(c, in[:]); err != nil || string(in[:4]) != helloMagic || binary.BigEndian.Uint32(in[4:8]) != version {
		return nil, false
	}
	if !s.await(c, admit.Nothing) {
		return nil, false
	}
	ss := &session{key: s.cfg.Key, server: newNonce()}
	copy(ss.peer[:], in[8:])
	if _, err := c.Write(append(ss.server[:], ss.mac(labelProof, nil)...)); err != nil {
		return nil, false
	}
	var auth [authSize]byte
	if !s.await(c, admit.Proof) {
		return nil, false
	}
	if _, err := io.ReadFull(c, auth[:]); err != nil || !ss.verify(labelAuth, nil, auth[:]) {
		return nil, false
	}
	return ss, s.await(c, admit.Nothing)
}

// give exports a new descriptor and sends it with the claim; where the
// export fails it says so (size 0, no descriptor), so that the peer does
// not dial again.
func (s *Server) give(c *net.UnixConn, ss *session) {
	fd, size, err := s.cfg.Export()
	if err != nil {
		body := giveBody(0, s.cfg.Claim)
		_, _ = c.Write(append(body, ss.mac(labelGive, body)...))
		return
	}
	defer syscall.Close(fd)
	body := giveBody(size, s.cfg.Claim)
	if _, _, err := c.WriteMsgUnix(append(body, ss.mac(labelGive, body)...), syscall.UnixRights(fd), nil); err == nil {
		s.count(func(st *Stats) { st.Given++ })
	}
	AfterGive()
}

// await records that the server now waits on c for w (see
// admit.Table.Await), wakes the accept loop if it waits for room, and
// reports false if c was evicted.
func (s *Server) await(c *net.UnixConn, w admit.Wait) bool {
	s.mu.Lock()
	open := s.table.Await(c, w, time.Now())
	s.mu.Unlock()
	if w != admit.Nothing {
		s.changed.Changed()
	}
	return open
}

// leave forgets c and closes it.
func (s *Server) leave(c *net.UnixConn) {
	s.mu.Lock()
	s.table.Remove(c)
	s.mu.Unlock()
	c.Close()
	s.changed.Changed()
}

// pause waits d, and reports false if Close came first.
func (s *Server) pause(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-s.stop:
		return false
	}
}

// count changes the stats under the lock.
func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// sameUser reports whether the process at the other end of c runs as
// this process's user.
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return int(cred.Uid) == syscall.Geteuid()
}
