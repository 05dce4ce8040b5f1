package fdshare

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A process killed before its Servers closed leaves their directories
// behind, each with a socket nobody listens on. The first Listen of a
// process removes those of its user that it can prove dead: every entry
// a socket that refuses a connection, the directory and its entries
// untouched for staleAge (a live Server binds its socket and listens
// within microseconds of making the directory). At most maxSwept
// directories are looked at, so that a crowded temporary directory costs
// little.
const (
	staleAge = time.Minute
	maxSwept = 64
)

var sweepOnce sync.Once

// sweepStale removes, once per process, the stale socket directories of
// this user under the temporary directories makeDir uses.
func sweepStale() {
	sweepOnce.Do(func() {
		for _, base := range []string{os.TempDir(), "/tmp"} {
			sweepIn(base, time.Now())
		}
	})
}

// sweepIn removes the stale socket directories in base at now.
func sweepIn(base string, now time.Time) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	looked := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), dirPrefix) || !e.IsDir() {
			continue
		}
		if looked++; looked > maxSwept {
			return
		}
		dir := filepath.Join(base, e.Name())
		if stale(dir, now) {
			os.RemoveAll(dir)
		}
	}
}

// stale reports whether dir is a socket directory of this user whose
// owner is dead: see the rule above.
func stale(dir string, now time.Time) bool {
	if !oldOwnDir(dir, now) {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode().Type() != os.ModeSocket || now.Sub(fi.ModTime()) < staleAge || !refuses(path) {
			return false
		}
	}
	return true
}

// oldOwnDir reports whether dir is a directory (not a link) of this
// user, closed to others, untouched for staleAge.
func oldOwnDir(dir string, now time.Time) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || now.Sub(fi.ModTime()) < staleAge {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// refuses reports whether a connection to the socket at path is refused:
// nobody listens on it.
func refuses(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
