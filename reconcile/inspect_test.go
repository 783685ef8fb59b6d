package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestInspectShouldListFailingKeysByAttemptsAndParkedOnesWithTruncatedErrors(t *testing.T) {
	h := reconciletest.New(t)
	store := memstore.New[string, int]()
	for _, k := range []string{"ok", "flaky", "broken", "long"} {
		store.Put(k, 1)
	}
	long := strings.Repeat("é", reconcile.MaxErrorBytes) // 2 bytes a rune: truncated on a rune boundary
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

	info := c.Inspect()
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
	assert.Equal(t, long[:reconcile.MaxErrorBytes], l.LastError)
	assert.Len(t, info.Parked, 2)
	assert.Equal(t, 0, info.Queue.Len)
	assert.Equal(t, uint64(4+1+2+2), info.Reconciles, "4 first runs, flaky's retry, two retries of each failing key")
}

func TestInspectShouldShowAReconcileInProgressWithItsAgeAndTheKeysWaitingBehindIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _, _, h := runBlockedController(t, "a", "b")
		h.Clock.Step(5 * time.Second)

		info := b.c.Inspect()
		assert.Equal(t, 1, info.Workers)
		assert.Equal(t, 1, info.Busy)
		require.Len(t, info.InFlight, 1)
		assert.Equal(t, "a", info.InFlight[0].Key)
		assert.Equal(t, 5*time.Second, info.InFlight[0].Age)
		assert.NotEmpty(t, info.InFlight[0].ReconcileID)
		assert.Equal(t, []string{"b"}, info.Ready)
		assert.Equal(t, 1, info.Queue.Processing)

		a, ok := b.c.InspectKey("a")
		require.True(t, ok)
		assert.Equal(t, "processing", a.Phase)
		assert.Equal(t, h.Clock.Now().Add(-5*time.Second), a.InFlightSince)
		k, ok := b.c.InspectKey("b")
		require.True(t, ok)
		assert.Equal(t, "ready", k.Phase)
		close(b.release)
	})
}

// blockedController is a blocker with its controller.
type blockedController struct {
	*blocker
	c *reconcile.Controller[string]
}

func runBlockedController(t *testing.T, keys ...string) (blockedController, context.CancelCauseFunc, chan error, *reconciletest.Harness) {
	t.Helper()
	h := reconciletest.New(t)
	store := memstore.New[string, int]()
	for _, k := range keys {
		store.Put(k, 1)
	}
	inf := reconciletest.Informer(h, "ints", store)
	b := newBlocker()
	c, err := reconcile.New("c", b, reconcile.For(inf), reconcile.WithClock(h.Clock), quiet)
	require.NoError(t, err)
	ctx, stop := context.WithCancelCause(h.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-b.started
	synctest.Wait()
	t.Cleanup(func() { stop(nil) })
	return blockedController{b, c}, stop, done, h
}

func TestInspectKeyShouldListRecentReconcilesNewestFirstWithLastSuccessAndDuration(t *testing.T) {
	h := reconciletest.New(t)
	store := memstore.New[string, int]()
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
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithRateLimiter(limiter), quiet)
	h.Settle()
	firstEnd := h.Clock.Now()
	store.Put("a", 2)
	h.Settle()
	h.Step(time.Second)

	info, ok := c.InspectKey("a")
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

	_, ok = c.InspectKey("never-seen")
	assert.False(t, ok)
}
