//go:build linux

package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/leasetest"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/reconcile"
)

// TestAGracefulStopOfAManagerOnAnEtcdLockShouldKeepTheNextLeaderWaitingUntilItsReconcilesHaveEnded
// is reconcile's test of the same name on a real etcd, in real time: two
// Managers in this process, each with a connection of its own, on one lock.
// A's reconcile is in progress when A is stopped and goes on for three
// leases within its shutdown grace; B must not reconcile before it has
// ended, and must take over once A has released the lock.
func TestAGracefulStopOfAManagerOnAnEtcdLockShouldKeepTheNextLeaderWaitingUntilItsReconcilesHaveEnded(t *testing.T) {
	endpoints := testserver.Etcd(t)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	key := "/converge-test/chaos/manager-" + hex.EncodeToString(suffix)
	tm := short
	store := must.Do(memstore.New[string, int]())
	store.Put("k", 1)
	j := leasetest.New()

	aHold := 3 * tm.lease // far beyond the time B would need to take over an unrenewed lease
	a := startEtcdManager(t, endpoints, key, "a", tm, j.Holding("a", aHold), store)
	require.True(t, j.Await(30*time.Second, func(_, running []leasetest.Interval) bool { return len(running) == 1 }), "a reconciles")
	b := startEtcdManager(t, endpoints, key, "b", tm, j.Holding("b", 10*time.Millisecond), store)
	require.Eventually(t, func() bool { return b.m.Elector().Leader() == "a" }, 10*time.Second, time.Millisecond, "b campaigns")

	stopping := time.Now()
	a.cancel()
	require.NoError(t, a.wait(aHold+30*time.Second))
	aReturned := time.Now()
	require.True(t, j.Await(10*time.Second, func(done, _ []leasetest.Interval) bool {
		for _, iv := range done {
			if iv.Replica == "b" {
				return true
			}
		}
		return false
	}), "b takes over")
	b.cancel()
	require.NoError(t, b.wait(30*time.Second))

	done := j.Done()
	assert.Empty(t, leasetest.Overlaps(done, j.Running()), "terms overlap")
	require.GreaterOrEqual(t, len(done), 2)
	first, second := done[0], done[1]
	require.Equal(t, "a", first.Replica)
	require.Equal(t, "b", second.Replica)
	assert.True(t, first.End.After(stopping), "a's reconcile spanned its stop")
	assert.Greater(t, second.Term, first.Term)
	took := second.Start.Sub(aReturned)
	assert.Less(t, took, 5*time.Second, "b took over after a released the lock")
	// A renewal stall longer than RenewDeadline on a loaded machine would
	// end a's lease during its grace: its reconcile is then cancelled
	// (safe, and checked above), not finished.
	t.Logf("a's reconcile: %v of %v, cause %v; a stopped %v after it started; b reconciled %v after a's Run returned",
		first.End.Sub(first.Start).Round(time.Millisecond), aHold, first.Cause, stopping.Sub(first.Start).Round(time.Millisecond), took.Round(time.Millisecond))
}

// etcdManager is a Manager running in the background.
type etcdManager struct {
	m      *reconcile.Manager
	cancel context.CancelFunc
	done   chan error
}

// startEtcdManager runs a Manager with leader election on the etcd lock
// key, over a connection of its own, whose one controller reconciles store
// with rec. A cleanup stops it.
func startEtcdManager(t *testing.T, endpoints []string, key, id string, tm timing, rec reconcile.Reconciler[string], store *memstore.Store[string, int]) *etcdManager {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inf := must.Do(informer.New("ints", store))
	c, err := reconcile.New("ints", rec, reconcile.For(inf), reconcile.WithLogger(quiet))
	require.NoError(t, err)
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Lock: etcdlock.NewLock(cli, key), Logger: quiet, Leader: leader.Config{
		Identity: id, LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry, ReleaseOnCancel: true,
	}})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	ctx, cancel := context.WithCancel(context.Background())
	r := &etcdManager{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = r.wait(time.Minute)
	})
	return r
}

// wait waits up to timeout for Run to return and returns its error; a
// second call returns the same.
func (r *etcdManager) wait(timeout time.Duration) error {
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(timeout):
		return context.DeadlineExceeded
	}
}
