//go:build unix && !linux

package proc

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts a pod's process in its own process group. Without a
// parent-death signal, the worker notices its parent's death itself.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// dieWithParent does nothing: there is no parent-death signal here.
func dieWithParent(*syscall.SysProcAttr) {}

type spawner struct{}

func newSpawner() *spawner                 { return &spawner{} }
func (*spawner) start(cmd *exec.Cmd) error { return cmd.Start() }
func (*spawner) close()                    {}
