package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

// Exit statuses (see the package comment).
const (
	exitFailed = 1
	exitUsage  = 2
	exitNoGPU  = 3
)

// oneLine flattens an error into a single line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// maxSMs is the most thread blocks (one per SM) a Comm runs
// (a2a.Config.NumSMs).
const maxSMs = kernelabi.MaxBlocks

// checkWritable refuses, before anything runs, an output file that cannot
// be created (a missing directory, or a directory where the file belongs);
// "" is no file.
func checkWritable(flagName, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory (want a file name)", flagName, path)
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s %s: directory %s does not exist", flagName, path, dir)
	}
	return nil
}
