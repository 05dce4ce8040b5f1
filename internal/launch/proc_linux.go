package launch

import (
	"os/exec"
	"syscall"
)

// tieToParent makes the kernel kill a rank process when the process that
// started it dies, so a parent killed by a test timeout or a signal leaves
// no ranks behind on the GPUs.
func tieToParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
