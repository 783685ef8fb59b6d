package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// quiet is a logger that discards, for tests that provoke errors on purpose.
var quiet = reconcile.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// recorder is a reconciler that records what it saw: the value each key had
// in the store when it was reconciled, and how often.
type recorder struct {
	store *memstore.Store[string, int]

	mu    sync.Mutex
	seen  map[string][]int // values read per key; -1 when the key was gone
	calls int
	// outcome, if set, decides each call's result.
	outcome func(key string, n int) (reconcile.Result, error)
}

func newRecorder(store *memstore.Store[string, int]) *recorder {
	return &recorder{store: store, seen: map[string][]int{}}
}

func (r *recorder) Reconcile(_ context.Context, key string) (reconcile.Result, error) {
	v, _, ok, _ := r.store.Get(context.Background(), key)
	if !ok {
		v = -1
	}
	r.mu.Lock()
	r.seen[key] = append(r.seen[key], v)
	r.calls++
	n := len(r.seen[key])
	out := r.outcome
	r.mu.Unlock()
	if out != nil {
		return out(key, n)
	}
	return reconcile.Result{}, nil
}

// last returns the last value each key was reconciled with.
func (r *recorder) last() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, vs := range r.seen {
		out[k] = vs[len(vs)-1]
	}
	return out
}

// values returns the values key was reconciled with, in order.
func (r *recorder) values(key string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[key])
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[key])
}

func TestEveryKeyInTheStoreIsReconciledAfterStart(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for i := range 50 {
		store.Put(fmt.Sprint("k", i), i)
	}
	rec := newRecorder(store)
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithWorkers(4))
	h.Settle()

	last := rec.last()
	require.Len(t, last, 50)
	for i := range 50 {
		assert.Equal(t, i, last[fmt.Sprint("k", i)])
	}
}

func TestAChangeReconcilesItsKeyAndADeleteIsSeenAsGone(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	rec := newRecorder(store)
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf))
	h.Settle()

	store.Put("a", 1)
	h.Settle()
	store.Put("a", 2)
	h.Settle()
	_, _ = store.Delete(context.Background(), "a", 0)
	h.Settle()
	assert.Equal(t, []int{1, 2, -1}, rec.values("a"))
}

func TestAFailingKeyBacksOffExponentiallyAndResetsOnSuccess(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newRecorder(store)
	var failUntil = 4
	rec.outcome = func(_ string, n int) (reconcile.Result, error) {
		if n <= failUntil {
			return reconcile.Result{}, errors.New("boom")
		}
		return reconcile.Result{}, nil
	}
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Hour})
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithRateLimiter(limiter), quiet)
	h.Settle()

	// Failure n waits Base*2^(n-1): 1s, 2s, 4s, 8s.
	for n, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		require.Equal(t, n+1, rec.count("a"))
		st, ok := c.Status("a")
		require.True(t, ok)
		assert.Equal(t, n+1, st.Attempts)
		assert.EqualError(t, st.LastError, "boom")
		assert.Equal(t, h.Clock.Now().Add(wait), st.NextRetry, "retry %d", n+1)
		h.Step(wait - time.Millisecond)
		assert.Equal(t, n+1, rec.count("a"), "retried before its backoff")
		h.Step(time.Millisecond)
	}
	require.Equal(t, 5, rec.count("a"))
	_, failing := c.Status("a")
	assert.False(t, failing, "a success clears the key's failures")
	assert.Equal(t, 0, limiter.NumRequeues("a"), "a success resets the backoff")

	// The next failure starts from the base again.
	failUntil = 100
	store.Put("a", 2)
	h.Settle()
	st, _ := c.Status("a")
	assert.Equal(t, h.Clock.Now().Add(time.Second), st.NextRetry)
}

func TestRequeueAfterReconcilesTheKeyAgainAtThatTime(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newRecorder(store)
	rec.outcome = func(string, int) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf))
	h.Settle()
	require.Equal(t, 1, rec.count("a"))
	h.Step(59 * time.Second)
	assert.Equal(t, 1, rec.count("a"))
	h.Step(time.Second)
	assert.Equal(t, 2, rec.count("a"))
	h.Step(time.Minute)
	assert.Equal(t, 3, rec.count("a"))
}

func TestRequeueJitterStaysWithinItsFraction(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for i := range 20 {
		store.Put(fmt.Sprint("k", i), i)
	}
	rec := newRecorder(store)
	rec.outcome = func(_ string, n int) (reconcile.Result, error) {
		if n == 1 {
			return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
		}
		return reconcile.Result{}, nil
	}
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithRequeueJitter(0.5))
	h.Settle()
	h.Step(10*time.Second - time.Millisecond)
	assert.Equal(t, 20, rec.calls, "no key may come back before its RequeueAfter")
	h.Step(5*time.Second + time.Millisecond)
	assert.Equal(t, 40, rec.calls, "every key is back by RequeueAfter×1.5")
}

func TestATerminalErrorIsNotRetriedUntilTheKeyChanges(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newRecorder(store)
	rec.outcome = func(string, int) (reconcile.Result, error) {
		return reconcile.Result{}, reconcile.Terminal(errors.New("impossible spec"))
	}
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), quiet)
	h.Settle()
	h.Step(time.Hour)
	assert.Equal(t, 1, rec.count("a"))
	st, ok := c.Status("a")
	require.True(t, ok)
	assert.True(t, st.Terminal)
	assert.True(t, reconcile.IsTerminal(st.LastError))
	assert.Zero(t, st.NextRetry)

	store.Put("a", 2)
	h.Settle()
	assert.Equal(t, 2, rec.count("a"))
}

func TestAPanicIsRecoveredAndRetried(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newRecorder(store)
	rec.outcome = func(_ string, n int) (reconcile.Result, error) {
		if n == 1 {
			panic("nil map")
		}
		return reconcile.Result{}, nil
	}
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), quiet)
	h.Settle()
	st, ok := c.Status("a")
	require.True(t, ok)
	assert.ErrorContains(t, st.LastError, "panic: nil map")
	h.Step(time.Second)
	assert.Equal(t, 2, rec.count("a"))
	_, failing := c.Status("a")
	assert.False(t, failing)
}

// timedReconciler reports, for its first call, the deadline its context
// had and how the context ended.
type timedReconciler struct {
	started  chan time.Time // the deadline, if any
	ended    chan [2]error  // ctx.Err(), context.Cause(ctx)
	noDeadln chan struct{}
}

func newTimedReconciler() *timedReconciler {
	return &timedReconciler{started: make(chan time.Time, 1), ended: make(chan [2]error, 1), noDeadln: make(chan struct{}, 1)}
}

func (r *timedReconciler) Reconcile(ctx context.Context, _ string) (reconcile.Result, error) {
	// Non-blocking sends: only the first call is reported, and retries
	// must not block a stopping controller.
	if d, ok := ctx.Deadline(); ok {
		trySend(r.started, d)
	} else {
		trySend(r.noDeadln, struct{}{})
	}
	<-ctx.Done()
	trySend(r.ended, [2]error{ctx.Err(), context.Cause(ctx)})
	return reconcile.Result{}, ctx.Err()
}

func trySend[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

func TestTheReconcileTimeoutIsADeadlineOnTheControllersClock(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newTimedReconciler()
	inf := reconciletest.Informer(h, "ints", store)
	before := time.Now()
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithReconcileTimeout(5*time.Second), quiet)
	var deadline time.Time
	select {
	case deadline = <-rec.started:
	case <-rec.noDeadln:
		t.Fatal("the reconcile's context has no deadline")
	}
	assert.WithinRange(t, deadline, before.Add(5*time.Second), time.Now().Add(5*time.Second),
		"the deadline is wall-clock time, for clients that read it")
	h.Clock.Step(4 * time.Second)
	select {
	case got := <-rec.ended:
		t.Fatalf("ended before the fake clock reached the timeout: %v", got)
	default:
	}
	h.Clock.Step(time.Second)
	got := <-rec.ended
	assert.ErrorIs(t, got[0], context.DeadlineExceeded, "ctx.Err()")
	assert.ErrorIs(t, got[1], context.DeadlineExceeded, "context.Cause(ctx)")
}

func TestTheReconcileTimeoutOnTheRealClockIsTheStandardDeadline(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	inf := must.Do(informer.New("ints", store))
	rec := newTimedReconciler()
	c, err := reconcile.New("ints", rec, reconcile.For(inf), reconcile.WithReconcileTimeout(50*time.Millisecond), quiet)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = inf.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	select {
	case <-rec.started:
	case <-rec.noDeadln:
		t.Fatal("the reconcile's context has no deadline")
	}
	got := <-rec.ended
	assert.Equal(t, context.DeadlineExceeded, got[0], "ctx.Err()")
	assert.Equal(t, context.DeadlineExceeded, got[1], "context.Cause(ctx)")
}

func TestAKeyThatVanishedBetweenRunsIsForgottenByTheRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		store := must.Do(memstore.New[string, int]())
		store.Put("doomed", 1)
		limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Millisecond, Cap: time.Second})
		rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{}, errors.New("always failing")
		})
		inf := must.Do(informer.New("ints", store, informer.WithClock(clk)))
		c, err := reconcile.New("c", rec, reconcile.For(inf), reconcile.WithClock(clk), reconcile.WithRateLimiter(limiter),
			reconcile.WithShutdownGrace(0), quiet)
		require.NoError(t, err)
		infCtx, stopInf := context.WithCancel(context.Background())
		infDone := make(chan error, 1)
		go func() { infDone <- inf.Run(infCtx) }()
		run := func() (stop func()) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			return func() { cancel(); require.NoError(t, <-done) }
		}

		stop := run()
		synctest.Wait()
		require.Equal(t, 1, limiter.NumRequeues("doomed"), "failed once, waiting for its backoff")
		stop()

		_, _ = store.Delete(context.Background(), "doomed", 0) // while no Run is in progress: never reconciled again
		synctest.Wait()
		stop = run()
		synctest.Wait()
		assert.Zero(t, limiter.NumRequeues("doomed"), "its failures are forgotten when the next Run starts")
		_, failing := c.Status("doomed")
		assert.False(t, failing)
		stop()
		stopInf()
		require.NoError(t, <-infDone)
	})
}

func TestAKeyIsParkedAfterItsAttemptBudgetAndRetriedOnItsNextChange(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	store.Put("b", 1)
	rec := newRecorder(store)
	rec.outcome = func(key string, _ int) (reconcile.Result, error) {
		if v, _, _, _ := rec.store.Get(context.Background(), key); key == "a" && v < 3 {
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	}
	reg := newRegistry()
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Second})
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithMaxAttempts(3),
		reconcile.WithRateLimiter(limiter), reconcile.WithMetrics(reg), quiet)
	h.Settle()
	h.Step(time.Second)
	h.Step(time.Second)
	require.Equal(t, 3, rec.count("a"))
	h.Step(time.Hour)
	assert.Equal(t, 3, rec.count("a"), "a parked key is not retried")
	assert.Equal(t, []string{"a"}, c.Parked())
	st, _ := c.Status("a")
	assert.True(t, st.Parked)
	assert.Equal(t, 3, st.Attempts)
	assert.Equal(t, 1.0, reg.value(t, "converge_reconcile_parked_keys", nil))

	store.Put("a", 3)
	h.Settle()
	assert.Equal(t, 4, rec.count("a"))
	assert.Empty(t, c.Parked())
	assert.Equal(t, 0.0, reg.value(t, "converge_reconcile_parked_keys", nil))
}

func TestCancelOnChangeCancelsTheReconcileInProgressAndRunsItAgain(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	var mu sync.Mutex
	var outcomes []string
	running := make(chan struct{}, 1)
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		v, _, _, _ := store.Get(context.Background(), key)
		if v == 1 {
			running <- struct{}{}
			<-ctx.Done()
			mu.Lock()
			outcomes = append(outcomes, fmt.Sprintf("1:%v", context.Cause(ctx) != nil))
			mu.Unlock()
			return reconcile.Result{}, ctx.Err()
		}
		mu.Lock()
		outcomes = append(outcomes, fmt.Sprint(v))
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	reg := newRegistry()
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithCancelOnChange(), reconcile.WithMetrics(reg), quiet)
	<-running
	store.Put("a", 2)
	h.Settle()
	assert.Equal(t, []string{"1:true", "2"}, outcomes)
	_, failing := c.Status("a")
	assert.False(t, failing, "a cancelled reconcile is not a failure")
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_reconcile_total", map[string]string{"result": "requeue"}))
	assert.Equal(t, 0.0, reg.value(t, "controller_runtime_reconcile_errors_total", nil))
}

// orderRecorder is a reconciler that records the order of the keys it is
// given, and holds every call until gate is closed; atGate receives when
// the first call waits there.
type orderRecorder struct {
	gate   chan struct{}
	atGate chan struct{}
	mu     sync.Mutex
	order  []string
}

func newOrderRecorder() *orderRecorder {
	return &orderRecorder{gate: make(chan struct{}), atGate: make(chan struct{}, 1)}
}

func (r *orderRecorder) Reconcile(_ context.Context, key string) (reconcile.Result, error) {
	trySend(r.atGate, struct{}{})
	<-r.gate
	r.mu.Lock()
	r.order = append(r.order, key)
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

func (r *orderRecorder) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

func TestFreshChangesGoBeforeTheInitialList(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for i := range 100 {
		store.Put(fmt.Sprint("old", i), i)
	}
	rec := newOrderRecorder()
	reg := newRegistry()
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithMetrics(reg))
	<-rec.atGate // the single worker holds an old key; the rest wait in the queue
	store.Put("fresh", 1)
	require.Eventually(t, func() bool {
		return reg.value(t, "workqueue_depth", map[string]string{"name": "ints", "priority": "-100"}) == 99 &&
			reg.value(t, "workqueue_depth", map[string]string{"name": "ints", "priority": "0"}) == 1
	}, 10*time.Second, time.Millisecond, "99 old keys and the fresh one queued")
	close(rec.gate)
	h.Settle()
	order := rec.keys()
	require.Len(t, order, 101)
	assert.Equal(t, "fresh", order[1], "the fresh change goes right after the key in progress: %v", order)
}

func TestSecondaryWatchesMapChangesToPrimaryKeys(t *testing.T) {
	h := reconciletest.New(t)
	owners := must.Do(memstore.New[string, int]())
	children := must.Do(memstore.New[string, string]()) // child -> owner
	owners.Put("o1", 0)
	owners.Put("o2", 0)
	rec := newRecorder(owners)
	ownerInf := reconciletest.Informer(h, "owners", owners)
	childInf := reconciletest.Informer(h, "children", children)
	reconciletest.Controller(h, "owners", rec, reconcile.For(ownerInf),
		reconcile.Watch(childInf, func(_ string, owner string) []string { return []string{owner} }))
	h.Settle()
	require.Equal(t, 1, rec.count("o1"))

	children.Put("c1", "o1")
	h.Settle()
	assert.Equal(t, 2, rec.count("o1"))
	assert.Equal(t, 1, rec.count("o2"))

	children.Put("c1", "o2") // a change of owner matters to both
	h.Settle()
	assert.Equal(t, 3, rec.count("o1"))
	assert.Equal(t, 2, rec.count("o2"))

	_, _ = children.Delete(context.Background(), "c1", 0)
	h.Settle()
	assert.Equal(t, 3, rec.count("o2"))
}

func TestPredicatesDropChangesTheyRejectButNotTheInitialList(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newRecorder(store)
	inf := reconciletest.Informer(h, "ints", store)
	sameParity := func(old, new int) bool { return old%2 == new%2 }
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf, reconcile.IgnoreUnchanged[string](sameParity)))
	h.Settle()
	store.Put("a", 3) // same parity: dropped
	h.Settle()
	assert.Equal(t, []int{1}, rec.values("a"))
	store.Put("a", 4)
	h.Settle()
	assert.Equal(t, []int{1, 4}, rec.values("a"))
}

func TestFromChannelReconcilesKeysSentOnIt(t *testing.T) {
	h := reconciletest.New(t)
	ch := make(chan string)
	var mu sync.Mutex
	var got []string
	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		mu.Lock()
		got = append(got, key)
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	reconciletest.Controller(h, "ticks", rec, reconcile.FromChannel("ticks", ch))
	ch <- "x"
	ch <- "y"
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 2
	}, 10*time.Second, time.Millisecond)
	slices.Sort(got)
	assert.Equal(t, []string{"x", "y"}, got)
}

func TestWithGroupsServesTheGroupsRoundRobin(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for i := range 50 {
		store.Put(fmt.Sprint("a", i), i) // a flood of group a's keys
	}
	store.Put("b0", 0) // one key of group b, listed last
	rec := newOrderRecorder()
	reg := newRegistry()
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithMetrics(reg),
		reconcile.WithGroups(func(k string) string { return k[:1] }))
	<-rec.atGate // the single worker holds the first key; the rest wait in the queue
	require.Eventually(t, func() bool {
		return reg.value(t, "workqueue_depth", map[string]string{"name": "ints", "priority": "-100"}) == 50
	}, 10*time.Second, time.Millisecond, "every listed key queued")
	close(rec.gate)
	h.Settle()
	order := rec.keys()
	require.Len(t, order, 51)
	assert.Contains(t, order[:3], "b0", "group b is served within a round, not after group a's flood: %v", order)
}

func TestTheDefaultRateLimiterFollowsTheControllersClockPastItsBurst(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for i := range 110 {
		store.Put(fmt.Sprintf("k%03d", i), i)
	}
	rec := newRecorder(store)
	rec.outcome = func(string, int) (reconcile.Result, error) { return reconcile.Result{}, errors.New("boom") }
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), quiet)
	h.Settle()

	// 110 failures at one instant of the fake clock: the overall bucket
	// (burst 100, 10/s) lets the first 100 retry after the per-key 5ms, and
	// spaces the other 10 by exactly 100ms of the controller's clock, not of
	// the wall clock, which moved meanwhile.
	var waits []time.Duration
	for i := range 110 {
		st, ok := c.Status(fmt.Sprintf("k%03d", i))
		require.True(t, ok)
		waits = append(waits, st.NextRetry.Sub(h.Clock.Now()))
	}
	slices.Sort(waits)
	assert.Equal(t, 5*time.Millisecond, waits[99])
	for i, w := range waits[100:] {
		assert.Equal(t, time.Duration(i+1)*100*time.Millisecond, w, "failure %d past the burst", 101+i)
	}
}
