package reconcile_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestInspectShouldListFailingKeysByAttemptsAndParkedOnesWithTruncatedErrors(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for _, k := range []string{"ok", "flaky", "broken", "long"} {
		store.Put(k, 1)
	}
	long := strings.Repeat("é", debugpage.MaxErrorBytes) // 2 bytes a rune: truncated on a rune boundary
	rec := newRecorder(store)
	rec.outcome = func(key string, n int) (reconcile.Result, error) {
		switch {
		case key == "broken":
			return reconcile.Result{}, errors.New("always")
		case key == "long":
			return reconcile.Result{}, errors.New(long)
		case key == "flaky" && n == 1:
			return reconcile.Result{}, errors.New("once")
		}
		return reconcile.Result{}, nil
	}
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Second})
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithMaxAttempts(3),
		reconcile.WithRateLimiter(limiter), quiet)
	h.Settle()
	h.Step(time.Second)
	h.Step(time.Second)

	info := reconcile.Inspect(c)
	assert.Equal(t, "ints", info.Name)
	assert.True(t, info.Running)
	assert.Equal(t, 2, info.FailingTotal, "flaky succeeded on its retry")
	assert.Equal(t, 2, info.ParkedTotal)
	require.Len(t, info.Failing, 2)
	assert.Equal(t, []string{"broken", "long"}, []string{info.Failing[0].Key, info.Failing[1].Key})
	assert.Equal(t, 3, info.Failing[0].Attempts)
	assert.Equal(t, "always", info.Failing[0].LastError)
	l := info.Failing[1]
	assert.Equal(t, len(long), l.LastErrorLen)
	assert.Equal(t, long[:debugpage.MaxErrorBytes], l.LastError)
	assert.Len(t, info.Parked, 2)
	assert.Equal(t, 0, info.Queue.Len)
	assert.Equal(t, uint64(4+1+2+2), info.Reconciles, "4 first runs, flaky's retry, two retries of each failing key")
}

func TestInspectShouldShowAReconcileInProgressWithItsAgeAndTheKeysWaitingBehindIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Metrics make the controller note reconcile times.
		b, _, _, h := startBlocked(t, []reconcile.Option{reconcile.WithMetrics(prometheus.NewRegistry())}, "a", "b")
		synctest.Wait()
		h.Clock.Step(5 * time.Second)
		first, second := b.first, map[string]string{"a": "b", "b": "a"}[b.first] // the list's order is the store's

		info := reconcile.Inspect(b.c)
		assert.Equal(t, 1, info.Workers)
		assert.Equal(t, 1, info.Busy)
		require.Len(t, info.InFlight, 1)
		assert.Equal(t, first, info.InFlight[0].Key)
		assert.Equal(t, 5*time.Second, info.InFlight[0].Age)
		assert.NotEmpty(t, info.InFlight[0].ReconcileID)
		assert.Equal(t, []string{second}, info.Ready)
		assert.Equal(t, 1, info.Queue.Processing)

		a, ok := reconcile.InspectKey(b.c, first)
		require.True(t, ok)
		assert.Equal(t, "processing", a.Phase)
		assert.Equal(t, h.Clock.Now().Add(-5*time.Second), a.InFlightSince)
		k, ok := reconcile.InspectKey(b.c, second)
		require.True(t, ok)
		assert.Equal(t, "ready", k.Phase)
		close(b.release)
	})
}

func TestInspectKeyShouldListRecentReconcilesNewestFirstWithLastSuccessAndDuration(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := newRecorder(store)
	rec.outcome = func(_ string, n int) (reconcile.Result, error) {
		h.Clock.Step(time.Duration(n) * 100 * time.Millisecond) // the reconcile takes n×100ms
		if n == 2 {
			return reconcile.Result{}, errors.New("second fails")
		}
		return reconcile.Result{}, nil
	}
	inf := reconciletest.Informer(h, "ints", store)
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Second})
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithRateLimiter(limiter), quiet,
		reconcile.WithMetrics(prometheus.NewRegistry())) // for the times
	h.Settle()
	firstEnd := h.Clock.Now()
	store.Put("a", 2)
	h.Settle()
	h.Step(time.Second)

	info, ok := reconcile.InspectKey(c, "a")
	require.True(t, ok)
	require.Len(t, info.Recent, 3)
	assert.Equal(t, []string{"success", "error", "success"},
		[]string{info.Recent[0].Result, info.Recent[1].Result, info.Recent[2].Result}, "newest first")
	assert.Equal(t, "second fails", info.Recent[1].Error)
	assert.Equal(t, 300*time.Millisecond, info.LastDuration)
	assert.Equal(t, h.Clock.Now(), info.LastSuccess)
	assert.Equal(t, firstEnd, info.Recent[2].Start.Add(info.Recent[2].Duration))
	assert.Equal(t, 0, info.Attempts, "the success cleared the failure")
	assert.Equal(t, "absent", info.Phase)

	_, ok = reconcile.InspectKey(c, "never-seen")
	assert.False(t, ok)
}

func TestAControllerWithoutMetricsOrDebugPagesShouldShowItsReconcilesWithoutReadingTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _, _, h := startBlocked(t, nil, "a")
		synctest.Wait()
		h.Clock.Step(5 * time.Second)

		info := reconcile.Inspect(b.c)
		require.Len(t, info.InFlight, 1)
		assert.Equal(t, "a", info.InFlight[0].Key)
		assert.Zero(t, info.InFlight[0].Started, "no clock read for the start")
		assert.Zero(t, info.InFlight[0].Age)
		k, ok := reconcile.InspectKey(b.c, "a")
		require.True(t, ok)
		assert.True(t, k.InFlight)
		assert.Zero(t, k.InFlightSince)
		close(b.release)
		synctest.Wait()
		k, _ = reconcile.InspectKey(b.c, "a")
		require.Len(t, k.Recent, 1)
		assert.Equal(t, "success", k.Recent[0].Result)
		assert.Zero(t, k.Recent[0].Start)
		assert.Zero(t, k.Recent[0].Duration)
		assert.Zero(t, k.LastSuccess, "unknown, not the zero time plus a duration")
	})
}
