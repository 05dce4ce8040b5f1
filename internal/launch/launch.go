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
	"sync"
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
	// Grace is how long the others may run on after one rank fails before
	// they are killed (they are bounded by their own timeouts too); 0: 15 s.
	Grace time.Duration
}

// Result is how one rank ended.
type Result struct {
	Rank   int
	Err    error // nil when it exited 0
	Output string
}

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
// they are killed). Every rank gets its rank, the world size, rank 0's
// address (a free loopback port), its device (if Devices is set) and a
// secret made for this group (NewSecret), after Env and this process's
// environment, so these win. It returns every rank's result, and an error
// naming the ranks that failed.
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
	results := waitAll(cmds, grace, cancel)
	var errs []error
	for r := range results {
		results[r].Output = bufs[r].String()
		if results[r].Err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", r, results[r].Err))
		}
	}
	if len(errs) > 0 {
		return results, fmt.Errorf("launch: %w", errors.Join(errs...))
	}
	return results, nil
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
	cmd.WaitDelay = 5 * time.Second
	tieToParent(cmd)
	return cmd, buf
}

// waitAll waits for every started rank; the first failure kills the
// others (cancel) after grace.
func waitAll(cmds []*exec.Cmd, grace time.Duration, cancel func()) []Result {
	results := make([]Result, len(cmds))
	var wg sync.WaitGroup
	var failOnce sync.Once
	for r, cmd := range cmds {
		wg.Go(func() {
			err := cmd.Wait()
			results[r] = Result{Rank: r, Err: err}
			if err != nil {
				failOnce.Do(func() { time.AfterFunc(grace, cancel) })
			}
		})
	}
	wg.Wait()
	return results
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
