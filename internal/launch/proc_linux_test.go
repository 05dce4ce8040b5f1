package launch

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRanksDieWithTheirParent(t *testing.T) {
	cmd := exec.Command("true")
	tieToParent(cmd)
	require.NotNil(t, cmd.SysProcAttr)
	require.Equal(t, syscall.SIGKILL, cmd.SysProcAttr.Pdeathsig)
}
