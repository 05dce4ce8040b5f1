//go:build !linux

package launch

import "os/exec"

// tieToParent does nothing where the kernel offers no parent-death signal.
func tieToParent(*exec.Cmd) {}
