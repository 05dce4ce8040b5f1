package fdshare

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ulysses-go/ulysses/internal/admit"
)

// Config is what a Server serves.
type Config struct {
	Key     []byte        // the buffer's ID: names the socket and keys every MAC
	Claim   Claim         // the owner's, sent with every descriptor
	Timeout time.Duration // the most one connection may last
	Export  Export
}

// Server hands a buffer's descriptor, bound to the owner's Claim, to
// every peer that proves the key, until Close.
type Server struct {
	cfg     Config
	dir     string
	ln      *net.UnixListener
	wg      sync.WaitGroup
	stop    chan struct{} // closed by Close
	changed admit.Room    // a connection's grace began or it left the table
	// live holds a token per serve goroutine: at most 2*MaxConns, those of
	// the open connections and of evicted ones still exiting.
	live chan struct{}

	mu     sync.Mutex // guards the fields below
	table  *admit.Table
	closed bool
	stats  Stats
}

// Stats counts what a Server met, for the tests.
type Stats struct {
	Given     int // descriptors handed over
	Evicted   int // unproven connections closed to make room
	Waits     int // times a newcomer found no connection due for eviction
	Strangers int // connections of another user, closed as accepted
}

// Listen starts serving in a new directory of its own (Dir), with the
// socket named from cfg.Key. It costs a directory, a socket and a
// goroutine until Close, and each open connection a descriptor and a
// goroutine; the first Listen of a process also removes what killed
// processes of this user left (sweepStale).
func Listen(cfg Config) (*Server, error) {
	sweepStale()
	dir, err := makeDir()
	if err != nil {
		return nil, err
	}
	s, err := listenAt(dir, SocketPath(dir, cfg.Key), cfg)
	if err != nil {
		os.Remove(dir)
	}
	return s, err
}

// listenAt is Listen on the socket at path in dir (the tests' squatters
// name another key's).
func listenAt(dir, path string, cfg Config) (*Server, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, shareError("listening on the buffer's socket", err)
	}
	cfg.Key = append([]byte(nil), cfg.Key...)
	s := &Server{cfg: cfg, dir: dir, ln: ln, stop: make(chan struct{}), changed: admit.NewRoom(),
		live: make(chan struct{}, 2*MaxConns), table: admit.New(MaxConns, helloGrace, proofGrace)}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Dir is the directory of the socket, for the handle.
func (s *Server) Dir() string { return s.dir }

// Stats returns what the Server has met so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close stops serving: it closes the socket (which removes it) and every
// connection, waits for their goroutines and removes the directory.
// Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	err := s.ln.Close()
	for c := range s.table.All() {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if rerr := os.Remove(s.dir); err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}
