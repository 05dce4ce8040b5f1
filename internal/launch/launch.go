// Package launch starts one process per rank on this machine and tells
// each, through its environment, its rank, the world size, its device,
// where rank 0 listens for the handle exchange and the group's secret for
// it. The test binaries and the ulysses command both use it to run a group.
package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Environment variables a rank process reads.
const (
	EnvRank   = "ULYSSES_RANK"
	EnvWorld  = "ULYSSES_WORLD"
	EnvAddr   = "ULYSSES_ADDR"
	EnvDevice = "ULYSSES_DEVICE"
	// EnvSecret holds the group's secret for the handle exchange
	// (exchange.TCPConfig.Secret): Run makes a fresh one per group, 64 hex
	// digits (32 bytes from crypto/rand). The environment of a process
	// can be read by its user and root only (/proc/PID/environ).
	EnvSecret = "ULYSSES_SECRET"
)

// NewSecret returns a fresh group secret as Run passes it in EnvSecret:
// 32 bytes from crypto/rand, in hex. It costs one read of crypto/rand.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand does not fail: it crashes the program instead
	return hex.EncodeToString(b)
}

// Spec describes a group of processes.
type Spec struct {
	Exe     string   // program to run for every rank
	Args    []string // its arguments
	World   int      // number of ranks
	Devices []int    // device of each rank; nil: the rank's own default
	Env     []string // extra environment for every rank
	// Output receives every line the ranks print, prefixed "[rank N] ".
	// Nil keeps it only in the Results.
	Output io.Writer
	// Grace is how long the others may run on after one rank fails (exits
	// non-zero or dies of a signal), to fail on their own (a Comm whose
	// peer is gone times out within its Config.Timeout, 10 s by default),
	// before they are stopped: SIGTERM, then SIGKILL if they are still
	// running 5 s later; 0: 15 s.
	Grace time.Duration
}

// Result is how one rank ended.
type Result struct {
	Rank   int
	Err    error // nil when it exited 0; an *exec.ExitError when it ran
	Output string
	// Stopped: the launcher stopped the rank (SIGTERM, then SIGKILL),
	// Grace after another rank failed or when Run's context ended.
	Stopped bool
}

// stopDelay is how long a rank that the launcher stopped with SIGTERM
// has to exit before it is killed; a variable for the tests.
var stopDelay = 5 * time.Second

// tailBytes bounds the end of a rank's output that Run's error quotes.
const tailBytes = 300

// FreeAddr returns a loopback address with a port that was free just now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("launch: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Run starts the ranks and waits for all of them, or until ctx ends (then
// they are stopped: SIGTERM, then SIGKILL 5 s later). Every rank gets its
// rank, the world size, rank 0's address (a free loopback port), its
// device (if Devices is set) and a secret made for this group
// (NewSecret), after Env and this process's environment, so these win.
// It returns every rank's result, and an error naming the ranks that
// failed: the first to fail first, with its exit status or signal, then
// each other rank's own status, or that the launcher stopped it and
// when, each with the last line of its output.
func Run(ctx context.Context, s Spec) ([]Result, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	secret := NewSecret()
	grace := s.Grace
	if grace == 0 {
		grace = 15 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var outMu sync.Mutex
	cmds := make([]*exec.Cmd, s.World)
	bufs := make([]*bytes.Buffer, s.World)
	for r := range cmds {
		cmds[r], bufs[r] = rankCommand(ctx, s, r, addr, secret, &outMu)
	}
	for r, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			cancel()
			for _, c := range cmds[:r] {
				c.Wait()
			}
			return nil, fmt.Errorf("launch: starting rank %d: %w", r, err)
		}
	}
	results, first := waitAll(ctx, cmds, grace, cancel)
	for r := range results {
		results[r].Output = bufs[r].String()
	}
	if err := failures(results, first, grace); err != nil {
		return results, fmt.Errorf("launch: %w", err)
	}
	return results, nil
}

// failures describes the ranks that failed, the first to fail on its own
// (first, or -1) first, then the others in rank order; nil if none did.
func failures(results []Result, first int, grace time.Duration) error {
	var errs []error
	describe := func(res Result) {
		if res.Err == nil {
			return
		}
		tail := outputTail(res.Output)
		switch {
		case res.Stopped && first >= 0:
			errs = append(errs, fmt.Errorf("rank %d: stopped by the launcher %v after rank %d failed (SIGTERM%s): %w%s",
				res.Rank, grace, first, killedLater(res.Err), res.Err, tail))
		case res.Stopped:
			errs = append(errs, fmt.Errorf("rank %d: stopped by the launcher as its context ended (SIGTERM%s): %w%s",
				res.Rank, killedLater(res.Err), res.Err, tail))
		case res.Rank == first:
			errs = append(errs, fmt.Errorf("rank %d failed first: %w%s%s", res.Rank, res.Err, bySignal(res.Err), tail))
		default:
			errs = append(errs, fmt.Errorf("rank %d: %w%s%s", res.Rank, res.Err, bySignal(res.Err), tail))
		}
	}
	if first >= 0 {
		describe(results[first])
	}
	for _, res := range results {
		if res.Rank != first {
			describe(res)
		}
	}
	return errors.Join(errs...)
}

// bySignal says, for a rank that died of a signal the launcher did not
// send, that it did not: another process (or the kernel) sent it.
func bySignal(err error) string {
	if _, ok := signalOf(err); ok {
		return " (a signal the launcher did not send)"
	}
	return ""
}

// killedLater says, for a rank the launcher stopped that died of
// SIGKILL, that SIGTERM did not end it within stopDelay.
func killedLater(err error) string {
	if sig, ok := signalOf(err); ok && sig == os.Kill {
		return fmt.Sprintf(", then SIGKILL %v later", stopDelay)
	}
	return ""
}

// outputTail is the last line of a rank's output, at most tailBytes of
// its end, quoted after "; its output ended: ", or "; no output".
func outputTail(out string) string {
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return "; no output"
	}
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if len(out) > tailBytes {
		out = "..." + out[len(out)-tailBytes:]
	}
	return fmt.Sprintf("; its output ended: %q", out)
}

// rankCommand is rank r's process, not started: its environment, and its
// output kept in the returned buffer (and copied to s.Output, prefixed).
func rankCommand(ctx context.Context, s Spec, r int, addr, secret string, outMu *sync.Mutex) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, s.Exe, s.Args...)
	env := append(os.Environ(), s.Env...)
	env = append(env, EnvRank+"="+strconv.Itoa(r), EnvWorld+"="+strconv.Itoa(s.World), EnvAddr+"="+addr, EnvSecret+"="+secret)
	if s.Devices != nil {
		env = append(env, EnvDevice+"="+strconv.Itoa(s.Devices[r]))
	}
	cmd.Env = env
	buf := &bytes.Buffer{}
	w := io.Writer(buf)
	if s.Output != nil {
		w = io.MultiWriter(w, &prefixWriter{mu: outMu, w: s.Output, prefix: fmt.Sprintf("[rank %d] ", r)})
	}
	cmd.Stdout, cmd.Stderr = w, w
	// When ctx ends (Grace after a rank failed, or the caller's context):
	// SIGTERM, and SIGKILL if the rank still runs stopDelay later.
	cmd.Cancel = func() error { return terminate(cmd.Process) }
	cmd.WaitDelay = stopDelay
	tieToParent(cmd)
	return cmd, buf
}

// terminate asks p to exit (SIGTERM), or kills it where signals cannot
// be sent (Windows).
func terminate(p *os.Process) error {
	err := p.Signal(syscall.SIGTERM)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return p.Kill()
	}
	return err
}

// signalOf returns the signal a rank died of.
func signalOf(err error) (os.Signal, bool) {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return nil, false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return nil, false
	}
	return ws.Signal(), true
}

// waitAll waits for every started rank of ctx (the one their commands
// were made with). The first to fail on its own (first; -1 if none did)
// stops the others (cancel) grace later; a rank that ends after ctx ended
// was stopped.
func waitAll(ctx context.Context, cmds []*exec.Cmd, grace time.Duration, cancel func()) (results []Result, first int) {
	results = make([]Result, len(cmds))
	first = -1
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r, cmd := range cmds {
		wg.Go(func() {
			err := cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			results[r] = Result{Rank: r, Err: err, Stopped: err != nil && ctx.Err() != nil}
			if err != nil && !results[r].Stopped && first < 0 {
				first = r
				time.AfterFunc(grace, cancel)
			}
		})
	}
	wg.Wait()
	return results, first
}

// Rank is what a rank process learns from its environment.
type Rank struct {
	Rank, World int
	Addr        string // where rank 0 listens for the handle exchange
	Device      *int   // nil: the rank's default device
	// Secret is the group's secret for the handle exchange
	// (exchange.TCPConfig.Secret); nil when EnvSecret is unset or empty.
	Secret []byte
}

// FromEnv reads the rank's environment; ok is false when the process was
// not started by Run.
func FromEnv() (r Rank, ok bool, err error) {
	rs, ws := os.Getenv(EnvRank), os.Getenv(EnvWorld)
	if rs == "" || ws == "" {
		return Rank{}, false, nil
	}
	if r.Rank, err = strconv.Atoi(rs); err != nil {
		return r, true, fmt.Errorf("launch: %s: %w", EnvRank, err)
	}
	if r.World, err = strconv.Atoi(ws); err != nil {
		return r, true, fmt.Errorf("launch: %s: %w", EnvWorld, err)
	}
	r.Addr = os.Getenv(EnvAddr)
	if sec := os.Getenv(EnvSecret); sec != "" {
		r.Secret = []byte(sec)
	}
	if ds := os.Getenv(EnvDevice); ds != "" {
		d, err := strconv.Atoi(ds)
		if err != nil {
			return r, true, fmt.Errorf("launch: %s: %w", EnvDevice, err)
		}
		r.Device = &d
	}
	return r, true, nil
}

// prefixWriter writes whole lines to w with a prefix, under a shared lock.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
