package reconcile_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// cancelledRun is a one-worker controller over a blocker, with its store,
// log, metrics and a stop for Run's context.
type cancelledRun struct {
	b     *blocker
	c     *reconcile.Controller[string]
	store *memstore.Store[string, int]
	logs  *syncBuffer
	reg   registry
	stop  context.CancelCauseFunc
	done  chan error
	h     *reconciletest.Harness
}

func startCancelledRun(t *testing.T, opts ...reconcile.Option) *cancelledRun {
	t.Helper()
	h := reconciletest.New(t)
	r := &cancelledRun{b: newBlocker(), store: must.Do(memstore.New[string, int]()), logs: &syncBuffer{}, reg: newRegistry(),
		done: make(chan error, 1), h: h}
	r.store.Put("a", 1)
	inf := reconciletest.Informer(h, "ints", r.store)
	logger := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	r.c, err = reconcile.New("c", r.b, append([]reconcile.Option{reconcile.For(inf), reconcile.WithClock(h.Clock),
		reconcile.WithMetrics(r.reg), reconcile.WithLogger(logger)}, opts...)...)
	require.NoError(t, err)
	ctx, stop := context.WithCancelCause(h.Context())
	r.stop = stop
	go func() { r.done <- r.c.Run(ctx) }()
	require.Equal(t, "a", <-r.b.started)
	t.Cleanup(func() { stop(nil) })
	return r
}

func (r *cancelledRun) cancelled(t *testing.T, cause string) float64 {
	t.Helper()
	return r.reg.value(t, "converge_reconcile_cancelled_errors_total", map[string]string{"cause": cause})
}

func TestAnErrorFromAReconcileCancelledByAChangeShouldBeLoggedAtDebugAndCounted(t *testing.T) {
	r := startCancelledRun(t, reconcile.WithCancelOnChange())
	r.store.Put("a", 2)
	require.Error(t, <-r.b.ended, "the change cancelled the reconcile")
	require.Equal(t, "a", <-r.b.started, "the change runs the key again")
	close(r.b.release)
	require.NoError(t, <-r.b.ended)
	r.stop(nil)
	require.NoError(t, <-r.done)

	assert.Contains(t, r.logs.String(), `level=DEBUG msg="reconcile cancelled because its key changed; its error is not a failure" controller=c key=a`)
	assert.Contains(t, r.logs.String(), `error="context canceled"`)
	assert.Equal(t, 1.0, r.cancelled(t, "changed"))
	assert.Equal(t, 0.0, r.reg.value(t, "controller_runtime_reconcile_errors_total", nil))
}

func TestAReconcileCancelledByShutdownShouldNotBeLoggedOrCountedAsAFailure(t *testing.T) {
	r := startCancelledRun(t, reconcile.WithShutdownGrace(10*time.Second))
	r.stop(nil)
	require.Eventually(t, func() bool { return r.h.Clock.HasWaiters() }, 10*time.Second, time.Millisecond)
	r.h.Clock.Step(10 * time.Second)
	require.ErrorIs(t, <-r.b.ended, context.Canceled)
	require.NoError(t, <-r.done)

	assert.NotContains(t, r.logs.String(), "level=ERROR")
	assert.Contains(t, r.logs.String(), `level=DEBUG msg="reconcile cancelled by the shutdown; its error is not a failure" controller=c key=a`)
	assert.Equal(t, 0.0, r.reg.value(t, "controller_runtime_reconcile_errors_total", nil))
	assert.Equal(t, 0.0, r.reg.value(t, "controller_runtime_reconcile_total", map[string]string{"result": "error"}))
	assert.Equal(t, 1.0, r.cancelled(t, "shutdown"))
	_, failing := r.c.Status("a")
	assert.False(t, failing, "a reconcile cut short by the shutdown is not a failed attempt")
}

func TestAReconcileCancelledByLostLeadershipShouldNotBeLoggedOrCountedAsAFailure(t *testing.T) {
	r := startCancelledRun(t)
	r.stop(reconcile.ErrLeadershipLost)
	require.ErrorIs(t, <-r.b.ended, context.Canceled)
	require.NoError(t, <-r.done)

	assert.NotContains(t, r.logs.String(), "level=ERROR")
	assert.Equal(t, 0.0, r.reg.value(t, "controller_runtime_reconcile_errors_total", nil))
	assert.Equal(t, 1.0, r.cancelled(t, "shutdown"))
}

// A reconcile that fails on its own during the grace is still a failure.
func TestAReconcileThatFailsDuringTheShutdownGraceShouldStillBeAFailure(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	started, fail := make(chan struct{}), make(chan struct{})
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		close(started)
		<-fail
		return reconcile.Result{}, assert.AnError
	})
	reg := newRegistry()
	c, err := reconcile.New("c", rec, reconcile.For(reconciletest.Informer(h, "ints", store)), reconcile.WithClock(h.Clock),
		reconcile.WithMetrics(reg), quiet)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(h.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-started
	stop()
	close(fail)
	require.NoError(t, <-done)
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_reconcile_errors_total", nil))
	assert.Equal(t, 0.0, reg.value(t, "converge_reconcile_cancelled_errors_total", nil))
}

// A reconcile that returns nil once the shutdown cancelled its context did
// its work: a success.
func TestAReconcileThatSucceedsAfterTheShutdownCancelledItShouldCountAsASuccess(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	started := make(chan struct{})
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		close(started)
		<-ctx.Done()
		return reconcile.Result{}, nil
	})
	reg := newRegistry()
	c, err := reconcile.New("c", rec, reconcile.For(reconciletest.Informer(h, "ints", store)), reconcile.WithClock(h.Clock),
		reconcile.WithMetrics(reg), reconcile.WithShutdownGrace(0), quiet)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(h.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-started
	stop()
	require.NoError(t, <-done)
	assert.Equal(t, 1.0, reg.value(t, "controller_runtime_reconcile_total", map[string]string{"result": "success"}))
	assert.Equal(t, 0.0, reg.value(t, "converge_reconcile_cancelled_errors_total", nil))
}
