//go:build linux

package chaos_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/leader"
	leaderpg "github.com/converge-go/converge/leader/postgres"
)

// timing is an elector configuration passed to the candidates.
type timing struct {
	lease, renew, retry time.Duration
}

// short timings let a test depose a dozen leaders in seconds. They are the
// "short" timings of the fail-over benchmarks (see bench), which explain
// why they are safe; the lease is whole seconds because client-go, which
// the benchmarks compare with, stores it so.
var short = timing{lease: 2 * time.Second, renew: 1400 * time.Millisecond, retry: 200 * time.Millisecond}

// retryJ is the longest wait between two attempts of a candidate.
func (tm timing) retryJ() time.Duration {
	return time.Duration(leader.DefaultJitterFactor * float64(tm.retry))
}

// killBound bounds the fail-over after a leader crashes: a candidate starts
// timing the leader's last renewal at its first poll after it (up to one
// jittered retry period later) and takes over at its first poll at least
// LeaseDuration after that (up to one more), plus margin for the new
// leader's first write on a loaded machine.
func (tm timing) killBound(margin time.Duration) time.Duration {
	return tm.lease + 2*tm.retryJ() + margin
}

func (tm timing) args() []string {
	return []string{"-lease", tm.lease.String(), "-renew", tm.renew.String(), "-retry", tm.retry.String()}
}

// event is a line of a candidate's output (see leader/chaos/candidate).
type event struct {
	Ev      string      `json:"ev"`
	ID      string      `json:"id"`
	T       int64       `json:"t"`
	Term    leader.Term `json:"term"`
	OK      bool        `json:"ok"`
	Refused bool        `json:"refused"`
	Late    bool        `json:"late"`
	Start   int64       `json:"start"`
	End     int64       `json:"end"`
	Done    int64       `json:"done"`
	Err     string      `json:"err"`
}

// logEntry is one record of the fenced log, in the backend's commit order.
type logEntry struct {
	Term     leader.Term `json:"term"`
	Identity string      `json:"identity"`
	Start    int64       `json:"start"`
	End      int64       `json:"end"`
	Late     bool        `json:"late"`
}

// mono is CLOCK_MONOTONIC in nanoseconds, the clock of the candidates'
// times.
func mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func ms(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }

var candidate struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// candidateBinary builds leader/chaos/candidate once per test binary (with
// -race if the tests run with it) and returns its path.
func candidateBinary(t *testing.T) string {
	t.Helper()
	candidate.once.Do(func() {
		candidate.dir, candidate.err = os.MkdirTemp("", "converge-chaos-")
		if candidate.err != nil {
			return
		}
		candidate.path = filepath.Join(candidate.dir, "candidate")
		args := []string{"build", "-o", candidate.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./candidate")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			candidate.err = fmt.Errorf("go build ./candidate: %v\n%s", err, out)
		}
	})
	require.NoError(t, candidate.err)
	return candidate.path
}

func removeCandidate() {
	if candidate.dir != "" {
		_ = os.RemoveAll(candidate.dir)
	}
}

// proc is one candidate process.
type proc struct {
	id     string
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process exited and its output was read
	stderr lockedBuffer

	mu     sync.Mutex
	paused bool
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.paused && !p.exited()
}

// signal sends sig and returns the monotonic time just before it did.
func (p *proc) signal(t *testing.T, sig syscall.Signal) int64 {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	at := mono()
	require.NoError(t, p.cmd.Process.Signal(sig), "signal %v to %s", sig, p.id)
	return at
}

// wait waits until the process exited and returns its exit code (-1 if a
// signal ended it).
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		require.FailNow(t, "candidate did not exit", "%s, %v", p.id, timeout)
		return 0
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// harness runs candidates and collects their events.
type harness struct {
	t    *testing.T
	bin  string
	args []string // all flags but -id

	mu      sync.Mutex
	events  []event
	changed chan struct{} // closed and replaced whenever events grows
	procs   []*proc
	serial  int
}

// newHarness returns a harness whose candidates run with args (backend
// and timing flags). When t ends it kills every candidate still running
// and fails t if one reported a data race or a panic.
func newHarness(t *testing.T, args ...string) *harness {
	h := &harness{t: t, bin: candidateBinary(t), args: args, changed: make(chan struct{})}
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) cleanup() {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			h.t.Errorf("candidate %s (pid %d) still running 30s after SIGKILL", p.id, p.cmd.Process.Pid)
		}
		if s := p.stderr.String(); strings.Contains(s, "DATA RACE") || strings.Contains(s, "panic:") || h.t.Failed() && s != "" {
			h.t.Errorf("candidate %s stderr:\n%s", p.id, s)
		}
	}
}

// start starts a candidate with a fresh identity and waits until it is
// ready.
func (h *harness) start(extra ...string) *proc {
	t := h.t
	t.Helper()
	h.mu.Lock()
	h.serial++
	id := fmt.Sprintf("c%02d", h.serial)
	h.mu.Unlock()

	p := &proc{id: id, done: make(chan struct{})}
	args := append(append(slices.Clone(h.args), extra...), "-id", id)
	p.cmd = exec.Command(h.bin, args...)
	// If the test binary dies (a timeout panic), so do its candidates.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				_, _ = fmt.Fprintf(&p.stderr, "stdout (not JSON): %s\n", sc.Bytes())
				continue
			}
			h.add(ev)
		}
		_ = p.cmd.Wait()
	}()
	h.await(30*time.Second, "candidate "+id+" ready", func(ev event) bool { return ev.Ev == "ready" && ev.ID == id })
	return p
}

func (h *harness) add(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
	close(h.changed)
	h.changed = make(chan struct{})
}

// snapshot returns the events so far (the slice is never modified).
func (h *harness) snapshot() []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events
}

// await waits up to timeout for an event that matches, among all events so
// far, and returns the first.
func (h *harness) await(timeout time.Duration, what string, match func(event) bool) event {
	h.t.Helper()
	ev, ok := h.awaitOK(timeout, match)
	require.True(h.t, ok, "timed out after %v waiting for %s", timeout, what)
	return ev
}

func (h *harness) awaitOK(timeout time.Duration, match func(event) bool) (event, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		h.mu.Lock()
		evs, changed := h.events, h.changed
		h.mu.Unlock()
		for _, ev := range evs[seen:] {
			if match(ev) {
				return ev, true
			}
		}
		seen = len(evs)
		select {
		case <-changed:
		case <-deadline.C:
			return event{}, false
		}
	}
}

func (h *harness) proc(id string) *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

// running returns the candidates that run (started, not exited, not
// paused).
func (h *harness) running() []*proc {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	return slices.DeleteFunc(procs, func(p *proc) bool { return !p.running() })
}

// leader waits until the highest term any candidate started has an
// accepted write and its candidate runs, and returns them.
func (h *harness) leader(timeout time.Duration) (*proc, leader.Term) {
	h.t.Helper()
	var (
		p    *proc
		term leader.Term
	)
	deadline := time.Now().Add(timeout)
	for {
		var holder string
		term = 0
		for _, ev := range h.snapshot() {
			if ev.Ev == "leading" && ev.Term > term {
				term, holder = ev.Term, ev.ID
			}
		}
		if term > 0 {
			_, written := h.awaitOK(0, func(ev event) bool { return ev.Ev == "write" && ev.OK && ev.Term == term })
			if p = h.proc(holder); written && p.running() {
				return p, term
			}
		}
		require.True(h.t, time.Now().Before(deadline), "no running leader with an accepted write after %v", timeout)
		time.Sleep(10 * time.Millisecond)
	}
}

// stopAll sends SIGTERM to every candidate that has not exited (resuming
// paused ones), waits for them, and checks that they exited cleanly.
func (h *harness) stopAll() {
	h.t.Helper()
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	var stopped []*proc
	for _, p := range procs {
		if !p.exited() {
			p.signal(h.t, syscall.SIGCONT)
			p.signal(h.t, syscall.SIGTERM)
			stopped = append(stopped, p)
		}
	}
	for _, p := range procs {
		p.wait(h.t, 30*time.Second)
	}
	for _, p := range stopped {
		assert.Equal(h.t, 0, p.cmd.ProcessState.ExitCode(), "exit code of %s after SIGTERM; stderr:\n%s", p.id, p.stderr.String())
	}
}

// store is a backend as the test sees it: the candidates' flags for it,
// and a way to read the fenced log.
type store struct {
	name    string
	args    []string // -backend, the address, -lock and -prefix
	readLog func(t *testing.T) []logEntry
}

func uniqueSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// etcdStore creates a fence at term 0 under a fresh prefix of the etcd at
// endpoints, and deletes the prefix when t ends.
func etcdStore(t *testing.T, endpoints []string) store {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	prefix := "/converge-test/chaos/" + strings.NewReplacer("/", "_").Replace(t.Name()) + "-" + uniqueSuffix()
	fence := prefix + "/fence"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(fence), "=", 0)).
		Then(clientv3.OpPut(fence, fmt.Sprintf("%020d", 0))).
		Commit()
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
		assert.NoError(t, err)
	})
	return store{
		name: "etcd",
		args: []string{"-backend", "etcd", "-endpoints", strings.Join(endpoints, ","), "-lock", prefix + "/lock", "-prefix", prefix},
		readLog: func(t *testing.T) []logEntry {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := cli.Get(ctx, prefix+"/log/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
			require.NoError(t, err)
			var out []logEntry
			for _, kv := range resp.Kvs {
				var e logEntry
				require.NoError(t, json.Unmarshal(kv.Value, &e))
				out = append(out, e)
			}
			return out
		},
	}
}

// postgresStore creates the fence (term 0) and log tables and the lease
// table in the PostgreSQL server at dsn, and drops the fence, the log and
// the lock's row when t ends.
func postgresStore(t *testing.T, dsn string) store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	prefix := "chaos_" + uniqueSuffix()
	fence, logTable := pgx.Identifier{prefix + "_fence"}.Sanitize(), pgx.Identifier{prefix + "_log"}.Sanitize()
	for _, stmt := range []string{
		`CREATE TABLE ` + fence + ` (id int PRIMARY KEY, term bigint NOT NULL)`,
		`INSERT INTO ` + fence + ` VALUES (1, 0)`,
		`CREATE TABLE ` + logTable + ` (seq bigserial PRIMARY KEY, term bigint NOT NULL, identity text NOT NULL,
			start_ns bigint NOT NULL, end_ns bigint NOT NULL, late boolean NOT NULL)`,
	} {
		_, err := pool.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	lockName := prefix + "-" + strings.ReplaceAll(t.Name(), "/", ".")
	require.NoError(t, leaderpg.NewLock(pool, lockName).EnsureSchema(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, stmt := range []string{`DROP TABLE ` + fence, `DROP TABLE ` + logTable} {
			_, err := pool.Exec(ctx, stmt)
			assert.NoError(t, err)
		}
		_, err := pool.Exec(ctx, `DELETE FROM `+leaderpg.DefaultTable+` WHERE name = $1`, lockName)
		assert.NoError(t, err)
	})
	return store{
		name: "postgres",
		args: []string{"-backend", "postgres", "-dsn", dsn, "-lock", lockName, "-prefix", prefix},
		readLog: func(t *testing.T) []logEntry {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rows, err := pool.Query(ctx, `SELECT term, identity, start_ns, end_ns, late FROM `+logTable+` ORDER BY seq`)
			require.NoError(t, err)
			out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (logEntry, error) {
				var (
					e    logEntry
					term int64
				)
				err := r.Scan(&term, &e.Identity, &e.Start, &e.End, &e.Late)
				e.Term = leader.Term(term)
				return e, err
			})
			require.NoError(t, err)
			return out
		},
	}
}

// writes counts the write events: accepted, refused, and failed (unknown
// outcome).
func writes(events []event) (ok, refused, failed int) {
	for _, ev := range events {
		switch {
		case ev.Ev != "write":
		case ev.OK:
			ok++
		case ev.Refused:
			refused++
		default:
			failed++
		}
	}
	return ok, refused, failed
}
