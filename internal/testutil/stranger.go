//go:build linux

package testutil

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// StrangerUID is the user a stranger runs as: nobody.
const StrangerUID = 65534

// Stranger is a child process of this test binary that runs one test as
// another user (StrangerUID): an attacker from outside the group's user.
// It stops when its standard input closes (Stop).
type Stranger struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	seen  strings.Builder
}

// StartStranger starts test, a top-level test of this test binary, as a
// Stranger with env added to its environment; ctx kills it. The binary
// is copied where that user can run it. It skips tb unless this process
// runs as root, which alone may start a process as another user. test
// itself starts with SkipUnlessChild.
func StartStranger(tb testing.TB, ctx context.Context, test string, env ...string) *Stranger {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skipf("starting a process of another user needs root; this runs as uid %d", os.Geteuid())
	}
	if head, err := readHead(os.Args[0], 2); err != nil || string(head) == "#!" {
		// A wrapper script (user-mode emulation runs the tests so: see
		// .ci/arm64) starts a binary beside it that another user cannot
		// be lent.
		tb.Skipf("the test binary %s is a script, not a binary to copy for another user (%v)", os.Args[0], err)
	}
	dir, err := os.MkdirTemp("", "ulysses-stranger-") // not tb.TempDir: its parent is closed to others
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	exe := filepath.Join(dir, "stranger.test")
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := copyFile(os.Args[0], exe, 0o755); err != nil {
		tb.Fatalf("copying the test binary for the stranger: %v", err)
	}
	s := &Stranger{cmd: exec.CommandContext(ctx, exe, "-test.run=^"+test+"$", "-test.v", "-test.count=1")}
	s.cmd.Env = append(inherited(), append([]string{envChild + "=" + test}, env...)...)
	s.cmd.Dir = dir
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: StrangerUID, Gid: StrangerUID}}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	s.cmd.Stderr = s.cmd.Stdout
	s.out = bufio.NewReader(stdout)
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("starting the stranger: %v", err)
	}
	return s
}

// WaitLine reads the stranger's output up to a line that starts with
// prefix, and returns that line; it fails tb if the output ends first.
func (s *Stranger) WaitLine(tb testing.TB, prefix string) string {
	tb.Helper()
	for {
		line, err := s.out.ReadString('\n')
		s.seen.WriteString(line)
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
		if err != nil {
			tb.Fatalf("the stranger ended before a line %q: %v\n%s", prefix, err, s.seen.String())
		}
	}
}

// Stop closes the stranger's standard input, waits for it to exit and
// returns all it printed; it fails tb unless its test passed.
func (s *Stranger) Stop(tb testing.TB) string {
	tb.Helper()
	s.stdin.Close()
	rest, _ := io.ReadAll(s.out)
	s.seen.Write(rest)
	err := s.cmd.Wait()
	out := s.seen.String()
	if err != nil || !strings.Contains(out, "--- PASS: ") {
		tb.Fatalf("the stranger failed: %v\n%s", err, out)
	}
	return out
}

// UntilStdinCloses returns a channel closed once this process's standard
// input ends: a Stranger's signal to stop.
func UntilStdinCloses() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	return done
}

// readHead returns the first n bytes of the file at path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = io.ReadFull(f, b)
	return b, err
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", from, err)
	}
	return out.Close()
}
