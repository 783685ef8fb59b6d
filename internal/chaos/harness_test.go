//go:build linux

package chaos_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/leader"
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
	return candidates.TimingArgs(tm.lease, tm.renew, tm.retry)
}

func ms(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }

// candidateBin is internal/chaos/candidate, built once per test binary (with
// -race if the tests run with it); TestMain removes it.
var candidateBin candidates.Binary

// signal sends sig to p and returns the monotonic time just before it did.
func signal(t *testing.T, p *candidates.Proc, sig syscall.Signal) int64 {
	t.Helper()
	at, err := p.Signal(sig)
	require.NoError(t, err)
	return at
}

// wait waits until p exited and returns its exit code (-1 if a signal
// ended it).
func wait(t *testing.T, p *candidates.Proc, timeout time.Duration) int {
	t.Helper()
	code, err := p.Wait(timeout)
	require.NoError(t, err)
	return code
}

// harness runs candidates and collects their events.
type harness struct {
	*candidates.Group
	t *testing.T
}

// newHarness returns a harness whose candidates run with args (backend
// and timing flags). When t ends it kills every candidate still running
// and fails t if one reported a data race or a panic.
func newHarness(t *testing.T, args ...string) *harness {
	bin, err := candidateBin.Path()
	require.NoError(t, err)
	h := &harness{Group: candidates.NewGroup(bin, "c", args...), t: t}
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) cleanup() {
	if err := h.KillAll(30 * time.Second); err != nil {
		h.t.Error(err)
	}
	for _, p := range h.Procs() {
		if s := p.Stderr(); strings.Contains(s, "DATA RACE") || strings.Contains(s, "panic:") || h.t.Failed() && s != "" {
			h.t.Errorf("candidate %s stderr:\n%s", p.ID(), s)
		}
	}
}

// start starts a candidate with a fresh identity and waits until it is
// ready.
func (h *harness) start(extra ...string) *candidates.Proc {
	h.t.Helper()
	p, err := h.Start(extra...)
	require.NoError(h.t, err)
	return p
}

// await waits up to timeout for an event that matches, among all events so
// far, and returns the first.
func (h *harness) await(timeout time.Duration, what string, match func(candidates.Event) bool) candidates.Event {
	h.t.Helper()
	ev, ok := h.Await(timeout, match)
	require.True(h.t, ok, "timed out after %v waiting for %s", timeout, what)
	return ev
}

// leader waits until the highest term any candidate started has an
// accepted write and its candidate runs, and returns them.
func (h *harness) leader(timeout time.Duration) (*candidates.Proc, leader.Term) {
	h.t.Helper()
	var (
		p    *candidates.Proc
		term leader.Term
	)
	deadline := time.Now().Add(timeout)
	for {
		var holder string
		term = 0
		for _, ev := range h.Events() {
			if ev.Ev == "leading" && ev.Term > term {
				term, holder = ev.Term, ev.ID
			}
		}
		if term > 0 {
			_, written := h.Await(0, func(ev candidates.Event) bool { return ev.Ev == "write" && ev.OK && ev.Term == term })
			if p = h.Proc(holder); written && p.Running() {
				return p, term
			}
		}
		require.True(h.t, time.Now().Before(deadline), "no running leader with an accepted write after %v", timeout)
		time.Sleep(10 * time.Millisecond)
	}
}

// pauses returns the times each candidate was paused, by identity.
func (h *harness) pauses() map[string][]candidates.Pause {
	out := map[string][]candidates.Pause{}
	for _, p := range h.Procs() {
		out[p.ID()] = p.Pauses()
	}
	return out
}

// stopAll sends SIGTERM to every candidate that has not exited (resuming
// paused ones), waits for them, and checks that they exited cleanly.
func (h *harness) stopAll() {
	h.t.Helper()
	procs := h.Procs()
	var stopped []*candidates.Proc
	for _, p := range procs {
		if !p.Exited() {
			signal(h.t, p, syscall.SIGCONT)
			signal(h.t, p, syscall.SIGTERM)
			stopped = append(stopped, p)
		}
	}
	for _, p := range procs {
		wait(h.t, p, 30*time.Second)
	}
	for _, p := range stopped {
		assert.Equal(h.t, 0, p.ExitCode(), "exit code of %s after SIGTERM; stderr:\n%s", p.ID(), p.Stderr())
	}
}

// store is a backend as the test sees it: the candidates' flags for it
// (Args), and a way to read the fenced log.
type store struct {
	*candidates.Store
	timeout time.Duration // of each operation on the backend
}

// etcdStore creates a fence at term 0 under a fresh prefix of the etcd at
// endpoints, and deletes the prefix when t ends.
func etcdStore(t *testing.T, endpoints []string) store {
	t.Helper()
	prefix := "/converge-test/chaos/" + strings.NewReplacer("/", "_").Replace(t.Name()) + "-" + candidates.UniqueSuffix()
	return newStore(t, 10*time.Second, func(ctx context.Context) (*candidates.Store, error) {
		return candidates.NewEtcdStore(ctx, endpoints, prefix)
	})
}

// postgresStore creates the fence (term 0) and log tables and the lease
// table in the PostgreSQL server at dsn, and drops the fence, the log and
// the lock's row when t ends.
func postgresStore(t *testing.T, dsn string) store {
	t.Helper()
	prefix := "chaos_" + candidates.UniqueSuffix()
	lock := prefix + "-" + strings.ReplaceAll(t.Name(), "/", ".")
	return newStore(t, 30*time.Second, func(ctx context.Context) (*candidates.Store, error) {
		return candidates.NewPostgresStore(ctx, dsn, prefix, lock)
	})
}

// newStore makes a store with create and removes it when t ends.
func newStore(t *testing.T, timeout time.Duration, create func(context.Context) (*candidates.Store, error)) store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := create(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
	})
	return store{Store: s, timeout: timeout}
}

// readLog returns the fenced log, in the backend's commit order.
func (s store) readLog(t *testing.T) []candidates.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	log, err := s.ReadLog(ctx)
	require.NoError(t, err)
	return log
}

// writes counts the write events: accepted, refused, and failed (unknown
// outcome).
func writes(events []candidates.Event) (ok, refused, failed int) {
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
