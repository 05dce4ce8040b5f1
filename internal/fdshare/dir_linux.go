package fdshare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ulysses-go/ulysses/internal/api"
)

// A Server's socket lives in a directory of its own, made with mode 0700
// under a random name: no process of another user can enter it, so none
// can connect, fill the listen queue or squat the name, and a peer dials
// only a socket whose directory it finds owned by its own user and closed
// to the others.

// dirPrefix starts the name of every socket directory.
const dirPrefix = "ulysses-fd-"

// MaxDirLen is the longest directory a handle carries (its 64 payload
// bytes).
const MaxDirLen = 64

// maxSocketPath is the longest path a Unix-domain socket can be bound
// to (sun_path holds 108 bytes, its NUL included).
const maxSocketPath = 107

// makeDir makes a new socket directory under the system's temporary
// directory (TMPDIR), or under /tmp where that path is too long for a
// handle.
func makeDir() (string, error) {
	var errs []error
	for _, base := range []string{os.TempDir(), "/tmp"} {
		dir, err := os.MkdirTemp(base, dirPrefix) // mode 0700
		if err == nil && len(dir) > MaxDirLen {
			err = fmt.Errorf("%s is longer than %d bytes", dir, MaxDirLen)
			os.Remove(dir)
		}
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", shareError("making the socket's directory", errors.Join(errs...))
}

// socketPath is where the socket of key is in dir, once dir is checked:
// an absolute, clean path of a directory called ulysses-fd-*, not a
// link, owned by this process's user and closed to every other.
func socketPath(dir string, key []byte) (string, error) {
	path := SocketPath(dir, key)
	switch {
	case len(dir) > MaxDirLen || len(path) > maxSocketPath || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir:
		return "", fmt.Errorf("a2a: the socket's directory %q is not a short absolute path: %w", dir, api.ErrShare)
	case !strings.HasPrefix(filepath.Base(dir), dirPrefix):
		return "", fmt.Errorf("a2a: %q is not a socket directory of this library: %w", dir, api.ErrShare)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("a2a: the socket's directory: %v (its owner closed or died, or does not share this file system): %w", err, api.ErrShare)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("a2a: the socket's directory %s is not a directory (%v): %w", dir, fi.Mode().Type(), api.ErrShare)
	case !ok || int(st.Uid) != os.Geteuid():
		return "", fmt.Errorf("a2a: the socket's directory %s belongs to another user: %w", dir, api.ErrShare)
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("a2a: the socket's directory %s is open to other users (%v): %w", dir, fi.Mode().Perm(), api.ErrShare)
	}
	return path, nil
}
