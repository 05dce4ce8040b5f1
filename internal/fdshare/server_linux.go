package fdshare

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Server hands a buffer's descriptor to every peer that proves the key,
// until Close.
type Server struct {
	ln      *net.UnixListener
	key     []byte
	export  Export
	timeout time.Duration
	slots   chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[*net.UnixConn]struct{}
	closed bool
}

// Listen starts serving the descriptor export makes on the socket named
// from key; each connection must be done within timeout. It costs a
// socket and a goroutine until Close.
func Listen(key []byte, timeout time.Duration, export Export) (*Server, error) {
	return listenAt(socketName(key), key, timeout, export)
}

// listenAt is Listen on the socket called name (the tests' squatters use
// another key's).
func listenAt(name string, key []byte, timeout time.Duration, export Export) (*Server, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, shareError("listening on the buffer's socket", err)
	}
	s := &Server{ln: ln, key: append([]byte(nil), key...), export: export, timeout: timeout,
		slots: make(chan struct{}, MaxConns), conns: map[*net.UnixConn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops serving: it closes the socket and every connection and
// waits for their goroutines. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors, say: let it pass
			continue
		}
		// Another user's connection is closed before it takes a slot, so
		// that strangers cannot hold the slots the peers need.
		if !sameUser(c) {
			c.Close()
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close() // full
			continue
		}
		if !s.track(c) {
			c.Close()
			<-s.slots
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.untrack(c)
			<-s.slots
		}()
	}
}

// track records c for Close, or reports false once closed.
func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *net.UnixConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// serve runs the owner's side of one connection; any misstep of the peer
// ends it without an answer.
func (s *Server) serve(c *net.UnixConn) {
	if err := c.SetDeadline(time.Now().Add(s.timeout)); err != nil {
		return
	}
	var in [helloSize]byte
	if _, err := io.ReadFull(c, in[:]); err != nil || string(in[:4]) != helloMagic || binary.BigEndian.Uint32(in[4:8]) != version {
		return
	}
	ss := session{key: s.key, server: newNonce()}
	copy(ss.peer[:], in[8:])
	if _, err := c.Write(append(ss.server[:], ss.mac(labelProof, nil)...)); err != nil {
		return
	}
	var auth [authSize]byte
	if _, err := io.ReadFull(c, auth[:]); err != nil || !ss.verify(labelAuth, nil, auth[:]) {
		return
	}
	fd, size, err := s.export()
	if err != nil {
		return // the peer reads EOF: its fetch fails
	}
	defer syscall.Close(fd)
	sz := sizeBytes(size)
	_, _, _ = c.WriteMsgUnix(append(sz, ss.mac(labelGive, sz)...), syscall.UnixRights(fd), nil)
	AfterGive()
}

// AfterGive runs once a descriptor is sent: a variable so that a test can
// kill the process with the descriptor in flight.
var AfterGive = func() {}

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
	return int(cred.Uid) == syscall.Getuid()
}
