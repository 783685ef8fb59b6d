package informer_test

import (
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
	"github.com/converge-go/converge/object"
)

func TestRequestDeleteShouldDeleteAKeyWithoutFinalizersAtTheRevisionRead(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	s.Put("w", widget{Size: 1})
	rev, op, err := informer.RequestDelete(t.Context(), s, "w")
	require.NoError(t, err)
	assert.Equal(t, informer.Deleted, op)
	assert.Equal(t, s.Revision(), rev)
	assert.Zero(t, s.Len())
}

func TestRequestDeleteShouldDeleteAValueThatIsNoObject(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	s.Put("n", 1)
	_, op, err := informer.RequestDelete(t.Context(), s, "n")
	require.NoError(t, err)
	assert.Equal(t, informer.Deleted, op)
	assert.Zero(t, s.Len())
}

func TestRequestDeleteShouldOnlyMarkAKeyWithFinalizersOnceAtTheClocksTime(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	s.Put("w", widget{Meta: object.Meta{Finalizers: []string{"a"}}})
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	clk := clocktesting.NewFakeClock(at)

	rev, op, err := informer.RequestDelete(t.Context(), s, "w", informer.WithUpdateClock(clk))
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
	got, gotRev, ok, _ := s.Get(t.Context(), "w")
	require.True(t, ok, "a key with finalizers is not deleted")
	assert.Equal(t, rev, gotRev)
	assert.Equal(t, at.UTC(), got.DeletionRequested, "the clock's time, in UTC")
	assert.True(t, got.Deleting())

	clk.Step(time.Hour)
	rev2, op, err := informer.RequestDelete(t.Context(), s, "w", informer.WithUpdateClock(clk))
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op)
	assert.Equal(t, rev, rev2)
	got, _, _, _ = s.Get(t.Context(), "w")
	assert.Equal(t, at.UTC(), got.DeletionRequested, "the first request's time is kept")
}

// A finalizer added between RequestDelete's read and its delete makes the
// delete conflict; the retry sees the finalizer and only marks the key.
func TestRequestDeleteShouldHonourAFinalizerAddedBeforeItsDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.Put("w", widget{})
		s.before = func(op string) {
			if op == "delete" {
				s.before = nil
				s.Put("w", widget{Meta: object.Meta{Finalizers: []string{"late"}}})
			}
		}
		_, op, err := informer.RequestDelete(t.Context(), s, "w")
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op)
		got, _, ok, _ := s.Get(t.Context(), "w")
		require.True(t, ok, "deleted despite the finalizer")
		assert.True(t, got.Deleting())
		assert.Equal(t, []string{"late"}, got.Finalizers)
	})
}

func TestRequestDeleteThenRemovingTheLastFinalizerShouldDeleteTheKey(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	_, _, err := informer.CreateOrUpdate(t.Context(), s, "w", func(w *widget) error { w.AddFinalizer("f"); return nil })
	require.NoError(t, err)
	_, op, err := informer.RequestDelete(t.Context(), s, "w")
	require.NoError(t, err)
	require.Equal(t, informer.Updated, op)

	// A controller that sees the deletion: its finalizer cannot come back.
	_, op, err = informer.Update(t.Context(), s, "w", func(w *widget) error { w.AddFinalizer("g"); return nil })
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op, "no finalizer is added to a deleting key")
	_, op, err = informer.Update(t.Context(), s, "w", func(w *widget) error { w.RemoveFinalizer("f"); return nil })
	require.NoError(t, err)
	assert.Equal(t, informer.Deleted, op)
	assert.Zero(t, s.Len())
}

func TestHelpersShouldRejectBadOptionsBeforeReadingAnything(t *testing.T) {
	s := newHooked[widget]()
	s.Put("w", widget{})
	noop := func(*widget) error { return nil }
	for name, opt := range map[string]informer.UpdateOption{
		"zero attempts":     informer.WithAttempts(0),
		"negative attempts": informer.WithAttempts(-1),
		"bad backoff":       informer.WithUpdateBackoff(backoff.Exponential{Base: -time.Second}),
		"nil clock":         informer.WithUpdateClock(nil),
		"nil option":        nil,
	} {
		_, _, err := informer.Update(t.Context(), s, "w", noop, opt)
		assert.Error(t, err, "Update, %s", name)
		_, _, err = informer.CreateOrUpdate(t.Context(), s, "w", noop, opt)
		assert.Error(t, err, "CreateOrUpdate, %s", name)
		_, _, err = informer.RequestDelete(t.Context(), s, "w", opt)
		assert.Error(t, err, "RequestDelete, %s", name)
	}
	assert.Zero(t, s.gets.Load(), "a helper with a bad option read the store")

	_, _, err := informer.Update(t.Context(), s, "w", nil)
	assert.ErrorContains(t, err, "nil mutate")
	_, _, err = informer.CreateOrUpdate(t.Context(), s, "w", nil)
	assert.ErrorContains(t, err, "nil mutate")
	_, _, err = informer.Update[string, widget](t.Context(), nil, "w", noop)
	assert.ErrorContains(t, err, "nil store")
	assert.Zero(t, s.gets.Load())
	assert.Equal(t, 1, s.Len(), "nothing was deleted")
}

func TestWithAttemptsOfOneShouldNeverWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.Put("w", widget{})
		s.conflict = true
		start := time.Now()
		_, _, err := informer.Update(t.Context(), s, "w", func(w *widget) error { w.Size++; return nil },
			informer.WithAttempts(1), informer.WithUpdateBackoff(fixedBackoff(time.Hour)))
		require.ErrorIs(t, err, informer.ErrConflict)
		assert.Zero(t, time.Since(start))
	})
}

func TestOpShouldPrintItsName(t *testing.T) {
	for op, want := range map[informer.Op]string{
		informer.Unchanged: "Unchanged",
		informer.Created:   "Created",
		informer.Updated:   "Updated",
		informer.Deleted:   "Deleted",
		informer.Op(9):     "Op(9)",
	} {
		assert.Equal(t, want, op.String())
	}
}
