// Package kernelsrc fingerprints the CUDA kernel sources, so that generated
// PTX can record what it was made from and a test can tell when it is stale.
package kernelsrc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Hash returns the hex sha256 of every *.cu and *.cuh file in dir, taken in
// name order over (name, NUL, content, NUL). Line endings are hashed as they
// are: the repository stores the sources with LF.
func Hash(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("kernelsrc: %w", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && (strings.HasSuffix(n, ".cu") || strings.HasSuffix(n, ".cuh")) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("kernelsrc: no .cu or .cuh files in %s", dir)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", fmt.Errorf("kernelsrc: %w", err)
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
