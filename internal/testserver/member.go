package testserver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EtcdMember is one etcd process started by scripts/servers.sh, which a test
// can kill and restart from its data dir (same name, ports and data).
//
// Its directory holds: data/ (the data dir), endpoint (host:port), cmd (the
// shell-quoted etcd command line), pid, log, and start (an executable that
// starts the member unless it runs and waits until it is healthy).
type EtcdMember struct {
	Name     string // etcd --name, also the directory's base name
	Endpoint string // client host:port
	Dir      string
}

// EtcdMembers returns the single-node etcd's member (a slice of one), or
// skips or fails t like Etcd.
func EtcdMembers(t testing.TB) []EtcdMember {
	t.Helper()
	return members(t, lookup(t, EtcdStateDirEnv, "single-node etcd"))
}

// EtcdClusterMembers returns the 3-node cluster's members in name order, or
// skips or fails t like EtcdCluster.
func EtcdClusterMembers(t testing.TB) []EtcdMember {
	t.Helper()
	return members(t, lookup(t, EtcdClusterStateDirEnv, "3-node etcd cluster"))
}

func members(t testing.TB, dir string) []EtcdMember {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("etcd state dir: %v", err)
	}
	var out []EtcdMember
	for _, e := range entries {
		d := filepath.Join(dir, e.Name())
		ep, err := os.ReadFile(filepath.Join(d, "endpoint"))
		if err != nil {
			continue // not a member directory
		}
		out = append(out, EtcdMember{Name: e.Name(), Endpoint: strings.TrimSpace(string(ep)), Dir: d})
	}
	if len(out) == 0 {
		t.Fatalf("no etcd member directories in %s", dir)
	}
	slices.SortFunc(out, func(a, b EtcdMember) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// pid returns the member's recorded process id, 0 if none.
func (m EtcdMember) pid() int {
	b, err := os.ReadFile(filepath.Join(m.Dir, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Running reports whether the member's process is alive.
func (m EtcdMember) Running() bool { return alive(m.pid()) }

// alive reports whether pid runs. A zombie (dead, not yet reaped: a killed
// member's parent is the script that started it, long gone) counts as dead.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// Kill sends SIGKILL to the member (a crash: no clean shutdown) and waits
// until it is gone. A member still down when the test ends is started again
// by a cleanup, so one test's kill does not break the next test.
func (m EtcdMember) Kill(t testing.TB) {
	t.Helper()
	pid := m.pid()
	if !alive(pid) {
		t.Fatalf("etcd member %s is not running", m.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill etcd member %s (pid %d): %v", m.Name, pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("etcd member %s (pid %d) still alive 10s after SIGKILL", m.Name, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() {
		if !m.Running() {
			m.Start(t)
		}
	})
}

// Start starts the member from its data dir, unless it runs, and waits until
// it answers /health (for a cluster member: until it has a leader).
func (m EtcdMember) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(m.Dir, "start")).CombinedOutput()
	if err != nil {
		t.Fatalf("start etcd member %s: %v\n%s", m.Name, err, out)
	}
}
