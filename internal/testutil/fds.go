package testutil

import (
	"os"
	"slices"
	"testing"
	"time"
)

// OpenFDs lists the file descriptors this process has open
// (/proc/self/fd), for RequireFDs; it skips the test where /proc is not
// there to read.
func OpenFDs(tb testing.TB) []string {
	tb.Helper()
	fds, err := ListFDs()
	if err != nil {
		tb.Skipf("cannot list open file descriptors: %v", err)
	}
	return fds
}

// RequireFDs fails tb unless the process has the descriptors before had
// open, no more (waiting up to a second, for the runtime's own to
// settle: a closing connection's descriptor, say).
func RequireFDs(tb testing.TB, before []string) {
	tb.Helper()
	var now []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if now, err = ListFDs(); err != nil {
			tb.Fatalf("listing open file descriptors: %v", err)
		}
		if len(NewFDs(now, before)) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if left := NewFDs(now, before); len(left) != 0 {
		tb.Fatalf("file descriptors left open: %v", left)
	}
}

// ListFDs lists /proc/self/fd, each descriptor with where it points,
// without the one reading the directory: for the rank processes of tests,
// which have no testing.TB (OpenFDs is for tests).
func ListFDs() ([]string, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		target, err := os.Readlink("/proc/self/fd/" + n)
		if err != nil {
			continue // the directory's own descriptor, closed since
		}
		out = append(out, n+" -> "+target)
	}
	return out, nil
}

// NewFDs is what now (ListFDs) has that before had not.
func NewFDs(now, before []string) []string {
	var out []string
	for _, s := range now {
		if !slices.Contains(before, s) {
			out = append(out, s)
		}
	}
	return out
}
