package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/reconcile"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func noop(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil }

func TestManagerRejectsBadInputWhenBuilt(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	inf := must.Do(informer.New("ints", store))
	impostor := must.Do(informer.New("ints", store))
	c, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(inf))
	require.NoError(t, err)

	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "off"})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	assert.NoError(t, m.AddInformer(inf), "adding an informer the Manager runs already is a no-op")
	assert.ErrorContains(t, m.AddInformer(impostor), `informer "ints": the name is taken`)
	assert.ErrorContains(t, m.AddInformer(nil), "AddInformer(nil)")
	require.NoError(t, m.AddController(c))
	assert.ErrorContains(t, m.AddController(c), `controller "c": the name is taken`)
	assert.ErrorContains(t, m.AddController(nil), "AddController(nil)")
	var nilController *reconcile.Controller[string]
	assert.ErrorContains(t, m.AddController(nilController), "AddController(nil)")
	assert.ErrorContains(t, m.AddFunc("f", nil), "AddFunc(\"f\"): nil function")
	assert.ErrorContains(t, m.AddLeaderFunc("f", nil), "AddLeaderFunc(\"f\"): nil function")
	require.NoError(t, m.AddFunc("f", func(context.Context) error { return nil }))
	assert.ErrorContains(t, m.AddLeaderFunc("f", func(context.Context) error { return nil }), `function "f": the name is taken`)

	_, err = reconcile.NewManager(reconcile.ManagerOptions{Lock: memlock.NewLock()})
	assert.ErrorIs(t, err, leader.ErrInvalidConfig, "no identity")
	_, err = reconcile.NewManager(reconcile.ManagerOptions{Lock: memlock.NewLock(), Leader: leader.Config{
		Identity: "a", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second,
	}})
	assert.ErrorIs(t, err, leader.ErrInvalidConfig, "renew deadline above the lease")
	_, err = reconcile.NewManager(reconcile.ManagerOptions{Lock: memlock.NewLock(), Leader: leader.Config{
		Identity: "a", OnStartedLeading: func(context.Context) {},
	}})
	assert.ErrorContains(t, err, "must be nil")
}

// gatedSource is a memory store whose first List waits for open.
type gatedSource struct {
	*memstore.Store[string, int]
	open chan struct{}
}

func (s gatedSource) List(ctx context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	select {
	case <-s.open:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return s.Store.List(ctx)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestManagerServesHealthReadinessAndMetrics(t *testing.T) {
	src := gatedSource{must.Do(memstore.New[string, int]()), make(chan struct{})}
	src.Put("a", 1)
	inf := must.Do(informer.New("gated", src))
	reg := newRegistry()
	c, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(inf), reconcile.WithMetrics(reg))
	require.NoError(t, err)
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Gatherer: reg, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	require.Eventually(t, func() bool { return m.Addr() != "" }, 10*time.Second, time.Millisecond)
	base := "http://" + m.Addr()

	code, body := get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `informer "gated": not synced`)
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	close(src.open)
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		return reg.value(t, "controller_runtime_reconcile_total", map[string]string{"result": "success"}) == 1
	}, 10*time.Second, time.Millisecond)
	code, body = get(t, base+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `controller_runtime_reconcile_total{controller="c",result="success"} 1`)
	assert.Contains(t, body, `workqueue_adds_total{controller="c",name="c"}`)

	stop()
	require.NoError(t, <-done)
	_, err = http.Get(base + "/healthz")
	assert.Error(t, err, "the server stops with the manager")
}

// replica is a Manager with leader election over a shared lock, reconciling
// a shared store, counting what its reconciler saw.
type replica struct {
	m      *reconcile.Manager
	mu     sync.Mutex
	seen   map[string]int // reconciles per key
	terms  map[leader.Term]bool
	cancel context.CancelFunc
	done   chan error
}

// fastLeader is an election fast enough for tests on the real clock.
func fastLeader(id string) leader.Config {
	return leader.Config{Identity: id, LeaseDuration: 600 * time.Millisecond, RenewDeadline: 400 * time.Millisecond,
		RetryPeriod: 50 * time.Millisecond, ReleaseOnCancel: true}
}

func startReplica(t *testing.T, id string, lock leader.Lock, store *memstore.Store[string, int], standby bool) *replica {
	t.Helper()
	r := &replica{seen: map[string]int{}, terms: map[leader.Term]bool{}, done: make(chan error, 1)}
	inf := must.Do(informer.New("ints", store))
	c, err := reconcile.New("ints", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		term, ok := leader.TermFromContext(ctx)
		require.True(t, ok, "a leader's reconcile carries the term")
		r.mu.Lock()
		r.seen[key]++
		r.terms[term] = true
		r.mu.Unlock()
		return reconcile.Result{}, nil
	}), reconcile.For(inf), reconcile.WithLogger(quietLogger))
	require.NoError(t, err)
	r.m, err = reconcile.NewManager(reconcile.ManagerOptions{Addr: "off", Lock: lock, Leader: fastLeader(id), Standby: standby, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, r.m.AddInformer(inf))
	require.NoError(t, r.m.AddController(c))
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Errorf("replica %s did not stop", id)
		}
	})
	return r
}

func (r *replica) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key]
}

func (r *replica) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.seen {
		n += c
	}
	return n
}

func TestOnlyTheLeaderReconcilesAndANewLeaderReconcilesEveryKey(t *testing.T) {
	// In a bubble: the 200ms of standby below is virtual time, in which b
	// campaigns exactly four times, however loaded the machine is.
	synctest.Test(t, func(t *testing.T) {
		store := must.Do(memstore.New[string, int]())
		for i := range 10 {
			store.Put(fmt.Sprint("k", i), i)
		}
		lock := memlock.NewLock()
		a := startReplica(t, "a", lock, store, false)
		require.Eventually(t, func() bool { return a.total() == 10 }, 10*time.Second, time.Millisecond)
		b := startReplica(t, "b", lock, store, false)

		store.Put("k0", 100)
		require.Eventually(t, func() bool { return a.count("k0") == 2 }, 10*time.Second, time.Millisecond)
		time.Sleep(200 * time.Millisecond) // b retries every 50ms: four chances to misbehave
		synctest.Wait()
		assert.Zero(t, b.total(), "a standby replica reconciles nothing")
		assert.False(t, b.m.IsLeader())

		a.cancel() // a clean shutdown releases the lock
		require.NoError(t, <-a.done)
		a.done <- nil // for the cleanup
		require.Eventually(t, func() bool { return b.total() == 10 }, 10*time.Second, time.Millisecond, "the new leader reconciles every key")
		assert.True(t, b.m.IsLeader())
		a.mu.Lock()
		b.mu.Lock()
		defer a.mu.Unlock()
		defer b.mu.Unlock()
		for ta := range a.terms {
			for tb := range b.terms {
				assert.Less(t, ta, tb, "terms only grow")
			}
		}
	})
}

// steal takes the lock from whoever holds it, as another replica would:
// read, write the next term, and read again if the holder renewed in
// between.
func steal(t *testing.T, lock leader.Lock, thief string) leader.Record {
	t.Helper()
	for {
		cur, err := lock.Get(context.Background())
		require.NoError(t, err)
		next := cur
		next.HolderIdentity, next.Term = thief, cur.Term+1
		stored, err := lock.Update(context.Background(), cur, next)
		if errors.Is(err, leader.ErrConflict) {
			continue
		}
		require.NoError(t, err)
		return stored
	}
}

func TestLosingLeadershipStopsTheControllersAndEndsRun(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	lock := memlock.NewLock()
	r := startReplica(t, "a", lock, store, false)
	require.Eventually(t, func() bool { return r.total() == 1 }, 10*time.Second, time.Millisecond)
	steal(t, lock, "thief")
	select {
	case err := <-r.done:
		assert.ErrorIs(t, err, reconcile.ErrLeadershipLost)
		r.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after leadership was lost")
	}
}

func TestAStandbyManagerStandsByAfterLosingLeadershipAndLeadsAgain(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	lock := memlock.NewLock()
	r := startReplica(t, "a", lock, store, true)
	require.Eventually(t, func() bool { return r.count("a") == 1 }, 10*time.Second, time.Millisecond)
	stolen := steal(t, lock, "thief")
	require.Eventually(t, func() bool { return !r.m.IsLeader() }, 5*time.Second, time.Millisecond)
	// The thief releases; the standby manager takes over and reconciles
	// every key again.
	released := stolen
	released.HolderIdentity = ""
	_, err := lock.Update(context.Background(), stolen, released)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.count("a") == 2 }, 10*time.Second, time.Millisecond)
	assert.True(t, r.m.IsLeader())
	select {
	case err := <-r.done:
		t.Fatalf("a standby manager returned: %v", err)
	default:
	}
}

func TestAFailingFunctionEndsRunWithAnErrorNamingIt(t *testing.T) {
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "off", Logger: quietLogger})
	require.NoError(t, err)
	var stopped atomic.Bool
	require.NoError(t, m.AddFunc("steady", func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Store(true)
		return nil
	}))
	require.NoError(t, m.AddLeaderFunc("flaky", func(context.Context) error { return errors.New("disk full") }))
	err = m.Run(context.Background())
	assert.EqualError(t, err, `function "flaky": disk full`)
	assert.True(t, stopped.Load(), "everything else is stopped before Run returns")
}

func TestShutdownNamesWhatDidNotStopInTime(t *testing.T) {
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "off", ShutdownTimeout: 50 * time.Millisecond, Logger: quietLogger})
	require.NoError(t, err)
	release := make(chan struct{})
	require.NoError(t, m.AddFunc("stubborn", func(context.Context) error { <-release; return nil }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = m.Run(ctx)
	close(release)
	assert.ErrorContains(t, err, `shutdown timed out after 50ms; still running: function "stubborn"`)
}

func TestNewManagerShouldRejectALeaderConfigWithoutALock(t *testing.T) {
	for name, cfg := range map[string]leader.Config{
		"identity":         {Identity: "a"},
		"a timing":         {RenewDeadline: time.Second},
		"release":          {ReleaseOnCancel: true},
		"new leader hook":  {OnNewLeader: func(string) {}},
		"identity, timing": {Identity: "a", LeaseDuration: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := reconcile.NewManager(reconcile.ManagerOptions{Leader: cfg})
			assert.ErrorContains(t, err, "Leader is set but Lock is nil")
		})
	}
}

func TestNewManagerShouldRejectAnAddrThatIsNotHostPort(t *testing.T) {
	for _, addr := range []string{"8081", "localhost", "http://127.0.0.1:8081"} {
		_, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: addr})
		assert.ErrorContains(t, err, fmt.Sprintf("Addr %q: want host:port", addr))
	}
	for _, addr := range []string{"", "off", ":0", "127.0.0.1:0", "[::1]:8081"} {
		_, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: addr})
		assert.NoError(t, err, "Addr %q", addr)
	}
}

func TestAManagerShouldOpenNoPortUnlessAddrIsSet(t *testing.T) {
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: quietLogger})
	require.NoError(t, err)
	running := make(chan struct{})
	require.NoError(t, m.AddFunc("f", func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-running
	assert.Empty(t, m.Addr(), "no HTTP server")
	cancel()
	assert.NoError(t, <-done)
}

// causes is an error of an uncomparable type: == on two of them panics.
type causes []error

func (c causes) Error() string { return fmt.Sprint([]error(c)) }

func TestRunShouldReturnNilWhenTheCallerCancelsWithACauseOfAnUncomparableType(t *testing.T) {
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddFunc("f", func(ctx context.Context) error { <-ctx.Done(); return nil }))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(causes{errors.New("shutting down")})
	assert.NoError(t, m.Run(ctx), "the caller's cancellation is not a failure")
}

func TestRunShouldReturnBothAFailureAndAShutdownThatTimedOut(t *testing.T) {
	m, err := reconcile.NewManager(reconcile.ManagerOptions{ShutdownTimeout: 50 * time.Millisecond, Logger: quietLogger})
	require.NoError(t, err)
	release := make(chan struct{})
	defer close(release)
	require.NoError(t, m.AddFunc("stubborn", func(context.Context) error { <-release; return nil }))
	diskFull := errors.New("disk full")
	require.NoError(t, m.AddFunc("flaky", func(context.Context) error { return diskFull }))
	err = m.Run(context.Background())
	assert.ErrorIs(t, err, diskFull)
	assert.ErrorContains(t, err, `function "flaky": disk full`)
	assert.ErrorContains(t, err, `shutdown timed out after 50ms; still running: function "stubborn"`)
}

func TestAnInformerThatFailsShouldBeNamedOnceInRunsError(t *testing.T) {
	inf := must.Do(informer.New("ints", must.Do(memstore.New[string, int]())))
	ctx, cancel := context.WithCancel(context.Background())
	byHand := make(chan error, 1)
	go func() { byHand <- inf.Run(ctx) }()
	require.NoError(t, inf.WaitForSync(ctx))
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	assert.EqualError(t, m.Run(context.Background()), `informer "ints": Run called twice`)
	cancel()
	assert.NoError(t, <-byHand)
}
