package testserver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment variables for PostgreSQL (written by scripts/servers.sh).
const (
	// PostgresDSNEnv holds the connection string of the throwaway PostgreSQL
	// server: postgres://postgres@127.0.0.1:PORT/converge?sslmode=disable
	// (trust auth, no password).
	PostgresDSNEnv = "CONVERGE_POSTGRES_DSN"
	// PostgresStateDirEnv is the server's state directory (see PostgresMember).
	PostgresStateDirEnv = "CONVERGE_POSTGRES_STATE_DIR"
)

// Postgres returns the DSN of the throwaway PostgreSQL server (database
// converge, user postgres, no password, over TCP on 127.0.0.1), or skips or
// fails t if there is none (see the package doc).
//
// Tests share it, also across packages running in parallel: use names
// (tables, schemas, advisory lock keys, channels) unique to the test, and
// leave the server running when the test ends. The server runs with
// client_connection_check_interval=500ms, so a killed client's session and
// its advisory locks end within about half a second, and max_connections=200.
func Postgres(t testing.TB) string {
	t.Helper()
	return lookup(t, PostgresDSNEnv, "PostgreSQL server")
}

// PostgresMember is the PostgreSQL server started by scripts/servers.sh, which
// a test can kill and restart from its data dir (same port and data).
//
// Its directory holds: port, dsn, cmd (the shell-quoted pg_ctl command line
// that starts it), pid (the postmaster's), log (a symlink to the server log),
// root (the temp directory with data/ and the socket dir) and start (an
// executable that starts the server unless it runs and waits until it accepts
// connections).
type PostgresMember struct {
	DSN string
	Dir string
}

// PostgresServer returns the PostgreSQL server's handle, or skips or fails t
// like Postgres. Killing it breaks every test using it at the same time:
// only do so from tests that do not run in parallel with other PostgreSQL
// tests of the package.
func PostgresServer(t testing.TB) PostgresMember {
	t.Helper()
	dsn := lookup(t, PostgresDSNEnv, "PostgreSQL server")
	dir := lookup(t, PostgresStateDirEnv, "PostgreSQL server")
	if _, err := os.Stat(filepath.Join(dir, "start")); err != nil {
		t.Fatalf("PostgreSQL state dir: %v", err)
	}
	return PostgresMember{DSN: dsn, Dir: dir}
}

// pid returns the postmaster's recorded process id, 0 if none.
func (m PostgresMember) pid() int {
	b, err := os.ReadFile(filepath.Join(m.Dir, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Running reports whether the server's postmaster is alive.
func (m PostgresMember) Running() bool { return alive(m.pid()) }

// Kill sends SIGKILL to the postmaster and every process it started (a crash
// of the whole server: no clean shutdown, every session dropped at once) and
// waits until they are gone. A server still down when the test ends is
// started again by a cleanup.
func (m PostgresMember) Kill(t testing.TB) {
	t.Helper()
	pid := m.pid()
	if !alive(pid) {
		t.Fatalf("PostgreSQL server is not running")
	}
	pids := append([]int{pid}, children(pid)...)
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("kill PostgreSQL process %d: %v", p, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("PostgreSQL process %d still alive 10s after SIGKILL", p)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		if !m.Running() {
			m.Start(t)
		}
	})
}

// Start starts the server from its data dir, unless it runs, and waits until
// it accepts connections (after a Kill: after crash recovery, ~0.3 s).
func (m PostgresMember) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(m.Dir, "start")).CombinedOutput()
	if err != nil {
		t.Fatalf("start PostgreSQL server: %v\n%s", err, out)
	}
}

// children returns the process ids whose parent is pid.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the parenthesised command name: state, then ppid.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
