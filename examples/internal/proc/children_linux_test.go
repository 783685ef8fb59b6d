package proc

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChildrenShouldStartWithAParentDeathSignalAndKeepTheCommandsAttributes(t *testing.T) {
	c := NewChildren()
	defer c.Close()
	cmd := exec.Command("sh", "-c", "exit 4")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, c.Start(cmd))
	assert.Equal(t, syscall.SIGKILL, cmd.SysProcAttr.Pdeathsig)
	assert.True(t, cmd.SysProcAttr.Setsid, "the caller's attributes are kept")
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 4, ee.ExitCode())

	plain := exec.Command("true")
	require.NoError(t, c.Start(plain))
	assert.Equal(t, syscall.SIGKILL, plain.SysProcAttr.Pdeathsig, "an attribute set is made when there is none")
	require.NoError(t, plain.Wait())

	assert.Error(t, c.Start(nil))
}
