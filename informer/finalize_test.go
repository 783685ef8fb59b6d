package informer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

const fin = "widgets.example.com/cleanup"

// cleanupCounter is a cleanup that reports done and err, counting its
// calls.
type cleanupCounter struct {
	calls int
	done  bool
	err   error
}

func (c *cleanupCounter) cleanup(context.Context) (bool, error) {
	c.calls++
	return c.done, c.err
}

// read returns key's value in s, failing the test if it is absent.
func read(t *testing.T, s *memstore.Store[string, widget], key string) widget {
	t.Helper()
	w, _, ok, err := s.Get(t.Context(), key)
	require.NoError(t, err)
	require.True(t, ok, "%s is absent", key)
	return w
}

// stored puts key "w" with finalizers fins into a new store, requests
// its deletion if deleting, and returns the store and the value read back.
func stored(t *testing.T, deleting bool, fins ...string) (*memstore.Store[string, widget], widget) {
	t.Helper()
	s := must.Do(memstore.New[string, widget]())
	s.Put("w", widget{Size: 1, Meta: object.Meta{Finalizers: fins}})
	if deleting {
		_, _, err := informer.RequestDelete(t.Context(), s, "w")
		require.NoError(t, err)
	}
	return s, read(t, s, "w")
}

func TestFinalizeShouldAddTheFinalizerBeforeTheCallerActs(t *testing.T) {
	s, v := stored(t, false)
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &v, fin, c.cleanup)
	require.NoError(t, err)
	assert.True(t, live, "a live value: the caller acts")
	assert.Equal(t, []string{fin}, read(t, s, "w").Finalizers, "in the store before the caller acts")
	assert.Zero(t, c.calls)
}

func TestFinalizeShouldWriteNothingWhenTheFinalizerIsInPlace(t *testing.T) {
	s, v := stored(t, false, fin)
	rev := s.Revision()
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &v, fin, c.cleanup)
	require.NoError(t, err)
	assert.True(t, live)
	assert.Equal(t, rev, s.Revision(), "nothing written")
}

func TestFinalizeShouldCleanUpThenRemoveTheFinalizerWhichDeletesTheKey(t *testing.T) {
	s, v := stored(t, true, fin)
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &v, fin, c.cleanup)
	require.NoError(t, err)
	assert.False(t, live, "a deleting value: the caller stops")
	assert.Equal(t, 1, c.calls)
	assert.Zero(t, s.Len(), "the last finalizer out deletes the key")
}

func TestFinalizeShouldKeepOtherFinalizersAndTheKey(t *testing.T) {
	s, v := stored(t, true, "other", fin)
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &v, fin, c.cleanup)
	require.NoError(t, err)
	assert.False(t, live)
	w := read(t, s, "w")
	assert.Equal(t, []string{"other"}, w.Finalizers)
	assert.True(t, w.Deleting())
}

func TestFinalizeShouldKeepTheFinalizerUntilCleanupIsDone(t *testing.T) {
	for _, c := range []*cleanupCounter{{done: false}, {done: true, err: errors.New("bucket busy")}} {
		s, v := stored(t, true, fin)
		live, err := informer.Finalize(t.Context(), s, "w", &v, fin, c.cleanup)
		assert.ErrorIs(t, err, c.err) // nil for the first
		assert.False(t, live)
		assert.Equal(t, 1, c.calls)
		assert.Equal(t, []string{fin}, read(t, s, "w").Finalizers, "done %v, err %v: kept", c.done, c.err)
	}
}

func TestFinalizeShouldDoNothingForADeletingValueWithoutItsFinalizer(t *testing.T) {
	s, v := stored(t, true, "other")
	rev := s.Revision()
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &v, fin, c.cleanup)
	require.NoError(t, err)
	assert.False(t, live)
	assert.Zero(t, c.calls, "it never acted: nothing to clean up")
	assert.Equal(t, rev, s.Revision(), "nothing written")
}

// The caller's value comes from a cache that lags: the store may have
// moved on.
func TestFinalizeShouldNotAddItsFinalizerToAKeyWhoseDeletionWasRequestedMeanwhile(t *testing.T) {
	s, cached := stored(t, false, "other")
	_, _, err := informer.RequestDelete(t.Context(), s, "w")
	require.NoError(t, err)
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &cached, fin, c.cleanup)
	require.NoError(t, err)
	assert.False(t, live, "deleting in the store: the caller must not act")
	assert.Equal(t, []string{"other"}, read(t, s, "w").Finalizers)
	assert.Zero(t, c.calls)
}

func TestFinalizeShouldReportAKeyGoneMeanwhileAsNotLiveWithoutAnError(t *testing.T) {
	s, cachedLive := stored(t, false, fin)
	cachedLive.Finalizers = nil
	_, _, err := informer.RequestDelete(t.Context(), s, "w")
	require.NoError(t, err)
	cachedDeleting := read(t, s, "w")
	_, err = s.Delete(t.Context(), "w", 0) // a raw delete, past the finalizer
	require.NoError(t, err)

	c := cleanupCounter{done: true}
	live, err := informer.Finalize(t.Context(), s, "w", &cachedLive, fin, c.cleanup)
	assert.NoError(t, err, "adding to a key that is gone: its deletion reconciles it again")
	assert.False(t, live)
	live, err = informer.Finalize(t.Context(), s, "w", &cachedDeleting, fin, c.cleanup)
	assert.NoError(t, err, "removing from a key that is gone: done already")
	assert.False(t, live)
	assert.Equal(t, 1, c.calls)
}

func TestFinalizeShouldRejectAnEmptyNameAndANilCleanup(t *testing.T) {
	s, v := stored(t, false)
	c := cleanupCounter{done: true}
	_, err := informer.Finalize(t.Context(), s, "w", &v, "", c.cleanup)
	assert.ErrorContains(t, err, "empty finalizer name")
	_, err = informer.Finalize(t.Context(), s, "w", &v, fin, nil)
	assert.ErrorContains(t, err, "nil cleanup")
	_, err = informer.Finalize[string, widget](t.Context(), s, "w", nil, fin, c.cleanup)
	assert.ErrorContains(t, err, "nil value")
	assert.Empty(t, read(t, s, "w").Finalizers, "nothing written")
}

func TestFinalizeShouldReturnTheStoresErrorWhenItCannotAddTheFinalizer(t *testing.T) {
	s, v := stored(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c := cleanupCounter{done: true}
	live, err := informer.Finalize(ctx, s, "w", &v, fin, c.cleanup)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, live, "without its finalizer the caller must not act")
}
