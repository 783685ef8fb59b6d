package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// registry is a Prometheus registry that tests read metrics from.
type registry struct{ *prometheus.Registry }

func newRegistry() registry { return registry{prometheus.NewRegistry()} }

// value returns the value of the counter, gauge or histogram count named
// name whose labels include labels; 0 if there is none.
func (r registry) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	if m := r.metric(t, name, labels); m != nil {
		return metricValue(m)
	}
	return 0
}

// metric returns the series named name whose labels include labels, or nil.
func (r registry) metric(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := r.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestNewRejectsBadInputWithClearErrors(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	inf := must.Do(informer.New("ints", store))
	other := must.Do(informer.New("others", must.Do(memstore.New[int, int]())))
	ok := reconcile.Func(func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	reg := newRegistry()
	_, err := reconcile.New("taken", ok, reconcile.For(inf), reconcile.WithMetrics(reg))
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		ctrl    string
		rec     reconcile.Reconciler[string]
		opts    []reconcile.Option
		wantErr string
	}{
		{"empty name", "", ok, []reconcile.Option{reconcile.For(inf)}, "empty controller name"},
		{"nil reconciler", "c", nil, []reconcile.Option{reconcile.For(inf)}, "nil reconciler"},
		{"nil func", "c", reconcile.Func[string](nil), []reconcile.Option{reconcile.For(inf)}, "nil reconciler"},
		{"no watch", "c", ok, nil, "nothing to watch"},
		{"zero workers", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithWorkers(0)}, "WithWorkers(0)"},
		{"negative timeout", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithReconcileTimeout(-1)}, "negative"},
		{"jitter above 1", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithRequeueJitter(2)}, "WithRequeueJitter(2)"},
		{"zero sync timeout", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithSyncTimeout(0)}, "WithSyncTimeout"},
		{"watch of another key type", "c", ok, []reconcile.Option{reconcile.For(other)}, `informer "others" delivers keys of another type than the controller's string`},
		{"rate limiter of another key type", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithRateLimiter(backoff.DefaultController[int](nil))}, "does not limit keys of type string"},
		{"nil informer", "c", ok, []reconcile.Option{reconcile.For[string, int](nil)}, "nil informer"},
		{"nil channel", "c", ok, []reconcile.Option{reconcile.FromChannel[string]("ch", nil)}, "nil channel"},
		{"metrics name taken", "taken", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithMetrics(reg)}, "already registered"},
		{"nil predicate in For", "c", ok, []reconcile.Option{reconcile.For(inf, nil)}, `For(informer "ints"): predicate 0 is nil`},
		{"nil predicate in Watch", "c", ok, []reconcile.Option{reconcile.Watch(inf, same, passAll, nil)}, `Watch(informer "ints"): predicate 1 is nil`},
		{"IgnoreUnchanged(nil)", "c", ok, []reconcile.Option{reconcile.For(inf, reconcile.IgnoreUnchanged[string, int](nil))}, "predicate 0 is nil"},
		{"groups of another key type", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithGroups(func(int) string { return "" })}, "WithGroups: func(int) string does not group keys of type string"},
		{"nil groups", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithGroups[string](nil)}, "WithGroups(nil)"},
		{"zero ageing", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithAgeing(0)}, "WithAgeing(0s): need a positive duration"},
		{"absurd worker count", "c", ok, []reconcile.Option{reconcile.For(inf), reconcile.WithWorkers(1_000_000)}, "WithWorkers(1000000): more than MaxWorkers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := reconcile.New(tc.ctrl, tc.rec, tc.opts...)
			assert.Nil(t, c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestRunWaitsForSyncAndNamesTheInformerThatDidNot(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inf := must.Do(informer.New("never-runs", must.Do(memstore.New[string, int]())))
	c, err := reconcile.New("c", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.For(inf), reconcile.WithClock(clk), reconcile.WithSyncTimeout(time.Minute))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	require.Eventually(t, func() bool { return clk.HasWaiters() }, 10*time.Second, time.Millisecond)
	clk.Step(time.Minute)
	err = <-done
	require.Error(t, err)
	assert.Contains(t, err.Error(), `controller "c": informers did not sync within 1m0s: "never-runs"`)
}

func TestAFailingSourceEndsRunWithItsError(t *testing.T) {
	c, err := reconcile.New("c", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.FromFunc("webhook", func(context.Context, func(string)) error { return errors.New("listen: address in use") }))
	require.NoError(t, err)
	err = c.Run(context.Background())
	assert.EqualError(t, err, `source "webhook": listen: address in use`)
}

func TestRunTwiceAtOnceIsAnError(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", newRecorder(store), reconcile.For(inf))
	h.Settle()
	assert.ErrorContains(t, c.Run(h.Context()), "already running")
}

// blocker is a reconciler that blocks every call until released or its
// context is done, and reports how each call ended.
type blocker struct {
	started chan string
	release chan struct{}
	ended   chan error
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 16), release: make(chan struct{}), ended: make(chan error, 16)}
}

func (b *blocker) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	b.started <- key
	select {
	case <-b.release:
		b.ended <- nil
		return reconcile.Result{}, nil
	case <-ctx.Done():
		b.ended <- context.Cause(ctx)
		return reconcile.Result{}, ctx.Err()
	}
}

// runBlocked runs a one-worker controller with a blocker over a store
// holding keys, with the given shutdown grace, and returns once the first
// reconcile has started: its blocker, a stop function giving Run's context
// a cause, Run's result, and the harness whose clock times the grace.
func runBlocked(t *testing.T, grace time.Duration, keys ...string) (*blocker, context.CancelCauseFunc, chan error, *reconciletest.Harness) {
	t.Helper()
	b, stop, done, h := startBlocked(t, []reconcile.Option{reconcile.WithShutdownGrace(grace)}, keys...)
	return b.blocker, stop, done, h
}

// blockedController is a blocker with its controller and the key whose
// reconcile it blocks first.
type blockedController struct {
	*blocker
	c     *reconcile.Controller[string]
	first string
}

// startBlocked is runBlocked with any options, and the controller.
func startBlocked(t *testing.T, opts []reconcile.Option, keys ...string) (blockedController, context.CancelCauseFunc, chan error, *reconciletest.Harness) {
	t.Helper()
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for _, k := range keys {
		store.Put(k, 1)
	}
	inf := reconciletest.Informer(h, "ints", store)
	b := newBlocker()
	c, err := reconcile.New("c", b, append([]reconcile.Option{reconcile.For(inf), reconcile.WithClock(h.Clock), quiet}, opts...)...)
	require.NoError(t, err)
	ctx, stop := context.WithCancelCause(h.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	first := <-b.started
	t.Cleanup(func() { stop(nil) })
	return blockedController{b, c, first}, stop, done, h
}

func TestShutdownLetsReconcilesInProgressFinishWithinTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, stop, done, _ := runBlocked(t, 10*time.Second, "a", "b") // one worker: "b" waits in the queue
		stop(nil)
		synctest.Wait() // everything that would act on the stop has
		select {
		case err := <-done:
			t.Fatalf("Run returned during the grace period: %v", err)
		case err := <-b.ended:
			t.Fatalf("reconcile ended during the grace period: %v", err)
		default:
		}
		close(b.release)
		assert.NoError(t, <-b.ended)
		assert.NoError(t, <-done)
		assert.Len(t, b.started, 0, "no key is taken after shutdown began")
	})
}

func TestShutdownCancelsReconcilesThatOutliveTheGrace(t *testing.T) {
	b, stop, done, h := runBlocked(t, 10*time.Second, "a")
	stop(nil)
	require.Eventually(t, func() bool { return h.Clock.HasWaiters() }, 10*time.Second, time.Millisecond)
	h.Clock.Step(10 * time.Second)
	assert.ErrorIs(t, <-b.ended, context.Canceled)
	assert.NoError(t, <-done)
}

func TestLosingLeadershipCancelsReconcilesAtOnce(t *testing.T) {
	b, lose, done, _ := runBlocked(t, time.Hour, "a")
	lose(reconcile.ErrLeadershipLost)
	assert.ErrorIs(t, <-b.ended, context.Canceled)
	assert.NoError(t, <-done)
}

func TestMetricsUseControllerRuntimeNames(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for _, k := range []string{"ok", "err", "term", "panic", "later"} {
		store.Put(k, 1)
	}
	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		switch key {
		case "err":
			return reconcile.Result{}, errors.New("x")
		case "term":
			return reconcile.Result{}, reconcile.Terminal(errors.New("x"))
		case "panic":
			panic("x")
		case "later":
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		}
		return reconcile.Result{}, nil
	})
	reg := newRegistry()
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "things", rec, reconcile.For(inf), reconcile.WithMetrics(reg), reconcile.WithWorkers(3), quiet)
	h.Settle()

	c := map[string]string{"controller": "things"}
	with := func(k, v string) map[string]string { return map[string]string{"controller": "things", k: v} }
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_reconcile_total", with("result", "success")))
	assert.Equal(t, 3.0, reg.value(t, "controller_runtime_reconcile_total", with("result", "error")))
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_reconcile_total", with("result", "requeue_after")))
	assert.Equal(t, 3.0, reg.value(t, "controller_runtime_reconcile_errors_total", c))
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_terminal_reconcile_errors_total", c))
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_reconcile_panics_total", c))
	assert.Equal(t, 5.0, reg.value(t, "controller_runtime_reconcile_time_seconds", c))
	assert.Equal(t, 0.0, reg.value(t, "controller_runtime_active_workers", c))
	assert.Equal(t, 3.0, reg.value(t, "controller_runtime_max_concurrent_reconciles", c))
	assert.Equal(t, 3.0, reg.value(t, "workqueue_retries_total", map[string]string{"name": "things"}), "error, panic and RequeueAfter are delayed adds")
	assert.Equal(t, 0.0, reg.value(t, "workqueue_depth", map[string]string{"name": "things"}))
}

func TestLogLinesCarryControllerKeyAndReconcileID(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(syncWriter{&mu, &buf}, nil))
	var id string
	rec := reconcile.Func(func(ctx context.Context, _ string) (reconcile.Result, error) {
		id = reconcile.ReconcileID(ctx)
		reconcile.LoggerFrom(ctx).Info("hello")
		return reconcile.Result{}, reconcile.Terminal(errors.New("nope"))
	})
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "things", rec, reconcile.For(inf), reconcile.WithLogger(logger))
	h.Settle()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, id)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	for _, l := range lines {
		assert.Contains(t, string(l), "controller=things key=a reconcileID="+id)
	}
	assert.Contains(t, string(lines[1]), "level=ERROR")
	assert.Equal(t, "", reconcile.ReconcileID(context.Background()))
}

type syncWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func same(k string, _ int) []string              { return []string{k} }
func passAll(reconcile.Change[string, int]) bool { return true }

func TestQueueMetricsAlreadyRegisteredAreAnErrorFromNewNotAPanicAtRun(t *testing.T) {
	inf := must.Do(informer.New("ints", must.Do(memstore.New[string, int]())))
	ok := reconcile.Func(func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	reg := newRegistry()
	_, err := queue.NewMetrics(reg, "c", "c") // a user's queue with the controller's name
	require.NoError(t, err)
	c, err := reconcile.New("c", ok, reconcile.For(inf), reconcile.WithMetrics(reg))
	assert.Nil(t, c)
	require.ErrorContains(t, err, `reconcile.New("c"): metrics: queue: NewMetrics("c", "c")`)
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		assert.NotContains(t, f.GetName(), "controller_runtime", "a failed New leaves no metrics behind")
	}
}

func TestWorkqueueCountersCarryTheControllerLabelAndKeepCountingAcrossRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := must.Do(memstore.New[string, int]())
		store.Put("a", 1)
		store.Put("b", 2)
		inf := must.Do(informer.New("ints", store))
		ok := reconcile.Func(func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
		reg := newRegistry()
		c, err := reconcile.New("things", ok, reconcile.For(inf), reconcile.WithMetrics(reg), quiet)
		require.NoError(t, err)
		infCtx, stopInf := context.WithCancel(context.Background())
		infDone := make(chan error, 1)
		go func() { infDone <- inf.Run(infCtx) }()
		adds := map[string]string{"name": "things", "controller": "things"}
		for term := 1; term <= 2; term++ { // a Manager runs the controller again on each term
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			synctest.Wait()
			assert.Equal(t, float64(2*term), reg.value(t, "workqueue_adds_total", adds), "term %d", term)
			stop()
			require.NoError(t, <-done)
		}
		stopInf()
		require.NoError(t, <-infDone)
	})
}
