package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestAStoreShouldInjectNoConflictByDefault(t *testing.T) {
	ctx := t.Context()
	s := must.Do(memstore.New[string, int]())
	for i := range 1000 {
		k := strconv.Itoa(i)
		rev, err := s.Create(ctx, k, i)
		require.NoError(t, err)
		_, err = s.Update(ctx, k, i+1, rev)
		require.NoError(t, err)
	}
	assert.Zero(t, s.InjectedConflicts())
}

func TestWithConflictsOfOneShouldFailEveryConditionalWriteAndWriteNothing(t *testing.T) {
	ctx := t.Context()
	s := must.Do(memstore.New[string, int](memstore.WithConflicts(1, 7)))
	rev := s.Put("a", 1)

	_, err := s.Create(ctx, "b", 1)
	assert.ErrorIs(t, err, informer.ErrConflict)
	_, err = s.Update(ctx, "a", 2, rev)
	assert.ErrorIs(t, err, informer.ErrConflict)
	_, err = s.Delete(ctx, "a", rev)
	assert.ErrorIs(t, err, informer.ErrConflict)
	assert.ErrorContains(t, err, "injected")
	assert.Equal(t, uint64(3), s.InjectedConflicts())

	assert.Equal(t, rev, s.Revision(), "an injected conflict wrote something")
	v, got, ok, err := s.Get(ctx, "a")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 1, v)
	assert.Equal(t, rev, got)
	assert.Equal(t, 1, s.Len())

	// The blind writes are not compare-and-swap, so nothing can conflict.
	s.Put("a", 3)
	_, err = s.Delete(ctx, "a", 0)
	assert.NoError(t, err)
	assert.Equal(t, uint64(3), s.InjectedConflicts())
}

// outcomes runs n Updates of one key and reports which conflicted.
func outcomes(t *testing.T, s *memstore.Store[string, int], n int) []bool {
	t.Helper()
	ctx := t.Context()
	rev := s.Put("k", 0)
	out := make([]bool, n)
	for i := range out {
		next, err := s.Update(ctx, "k", i, rev)
		if err != nil {
			require.ErrorIs(t, err, informer.ErrConflict)
			out[i] = true
			continue
		}
		rev = next
	}
	return out
}

func TestWithConflictsShouldInjectAtTheRateGivenTheSameWayForTheSameSeed(t *testing.T) {
	const n = 10_000
	a := outcomes(t, must.Do(memstore.New[string, int](memstore.WithConflicts(0.25, 42))), n)
	b := outcomes(t, must.Do(memstore.New[string, int](memstore.WithConflicts(0.25, 42))), n)
	c := outcomes(t, must.Do(memstore.New[string, int](memstore.WithConflicts(0.25, 43))), n)
	assert.Equal(t, a, b, "the same seed should give the same conflicts")
	assert.NotEqual(t, a, c, "another seed should give other conflicts")
	conflicts := 0
	for _, x := range a {
		if x {
			conflicts++
		}
	}
	// Binomial(10000, 0.25): mean 2500, standard deviation ~43.
	assert.InDelta(t, n/4, conflicts, 300)
}

func TestWithConflictsShouldBeAnErrorForARateOutsideZeroToOne(t *testing.T) {
	for _, rate := range []float64{-0.1, 1.1, math.NaN()} {
		s, err := memstore.New[string, int](memstore.WithConflicts(rate, 1))
		assert.ErrorContains(t, err, fmt.Sprintf("memstore.New: WithConflicts(%v, 1): the rate must be in [0, 1]", rate))
		assert.Nil(t, s)
	}
	_, err := memstore.New[string, int](memstore.WithConflicts(0, 1))
	assert.NoError(t, err)
}

// noWait makes Update retry at once: the test is about the retries, not
// their waits.
var noWait = backoff.Exponential{Base: time.Nanosecond, Cap: time.Nanosecond, Factor: 1}

type job struct {
	Want int
	Done int
}

// TestAControllerUsingUpdateShouldRetryThroughInjectedConflicts is what the
// option is for: a reconciler's write-back meets conflicts on the memory
// store, and the controller still converges, through Update's retries and,
// when all of one Update's attempts conflicted, through the reconcile's
// own requeue.
func TestAControllerUsingUpdateShouldRetryThroughInjectedConflicts(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, job](memstore.WithConflicts(0.5, 1)))
	const keys = 40
	for i := range keys {
		store.Put("job-"+strconv.Itoa(i), job{Want: i + 1})
	}
	inf := reconciletest.Informer(h, "jobs", store)
	var failed atomic.Int64
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		_, _, err := informer.Update(ctx, store, key, func(j *job) error {
			j.Done = j.Want
			return nil
		}, informer.WithUpdateBackoff(noWait))
		if errors.Is(err, informer.ErrConflict) {
			failed.Add(1)
		}
		return reconcile.Result{}, err
	})
	reconciletest.Controller(h, "jobs", rec, reconcile.For(inf))
	h.Settle()
	for range 10 {
		h.Step(time.Minute) // the requeues of Updates that ran out of attempts
	}

	entries, _, err := store.List(t.Context())
	require.NoError(t, err)
	require.Len(t, entries, keys)
	for _, e := range entries {
		assert.Equal(t, e.Value.Want, e.Value.Done, "%s did not converge", e.Key)
	}
	assert.Greater(t, store.InjectedConflicts(), uint64(keys/2), "too few conflicts to test the retry path")
	t.Logf("%d conflicts injected; %d reconciles ran out of attempts and were requeued", store.InjectedConflicts(), failed.Load())
}
