package main

import (
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheDemosAgentsShouldDieWhenTheDemoIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	testChildrenDieWithTheirParent(t, map[string]int{"agent": 3}, "demo")
}

func TestMeasuresControlPlaneAndAgentsShouldDieWhenMeasureIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	testChildrenDieWithTheirParent(t, map[string]int{"measure": 1, "agent": 2}, "measure", "--nodes", "2", "--pods", "2", "--timeout", "1m")
}

// testChildrenDieWithTheirParent starts this program with args, waits until
// its child processes run the modes in want (mode: how many), SIGKILLs it,
// and checks that each child is gone soon after: nothing else would stop
// them.
func testChildrenDieWithTheirParent(t *testing.T, want map[string]int, args ...string) {
	self, err := os.Executable()
	require.NoError(t, err)
	parent := exec.Command(self, args...)
	parent.Env = append(os.Environ(), asMainEnv+"=1")
	require.NoError(t, parent.Start())
	defer func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
	}()

	var kids []int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var modes map[string]int
		kids, modes = childrenOf(t, parent.Process.Pid)
		if maps.Equal(modes, want) {
			break
		}
		require.True(t, time.Now().Before(deadline), "%v runs %v as children, not %v", args, modes, want)
	}
	defer func() {
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // whatever survived, so as not to leave it running
		}
	}()

	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	var running []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		running = running[:0]
		for _, pid := range kids {
			if alive(pid) {
				running = append(running, pid)
			}
		}
		if len(running) == 0 || time.Now().After(deadline) {
			break
		}
	}
	assert.Empty(t, running, "children of %v (pids %v) still running 5s after it was killed", args, kids)
}

// childrenOf returns the pids of the live processes whose parent is pid,
// and how many run each mode of this program (the first argument after the
// program's name).
func childrenOf(t *testing.T, pid int) (kids []int, modes map[string]int) {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	modes = map[string]int{}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// "pid (comm) state ppid ...": the command name may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) || !alive(child) {
			continue
		}
		kids = append(kids, child)
		// Until it has called exec, a child's command line is its parent's.
		if args, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil {
			if words := strings.Split(string(args), "\x00"); len(words) > 1 {
				modes[words[1]]++
			}
		}
	}
	return kids, modes
}
