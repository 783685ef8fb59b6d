package kube_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

const finalizer = "test.converge.dev/cleanup"

// informer's write helpers run unchanged on the API server: CreateOrUpdate
// creates and then updates, Update of an unchanged value writes nothing,
// and the generation is the server's.
func TestCreateOrUpdateAndUpdateShouldWorkOnTheAPIServer(t *testing.T) {
	s := widgets(t, restConfig(t))
	ctx := t.Context()

	r1, op, err := informer.CreateOrUpdate(ctx, s, "w", func(w *Widget) error {
		w.Spec.Replicas = 1
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Created, op)

	r2, op, err := informer.CreateOrUpdate(ctx, s, "w", func(w *Widget) error {
		w.Spec.Replicas = 3
		w.Status.Ready = 1
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
	assert.Greater(t, r2, r1)

	r3, op, err := informer.Update(ctx, s, "w", func(w *Widget) error {
		w.Spec.Replicas = 3 // as it is
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op)
	assert.Equal(t, r2, r3, "an unchanged Update returns the revision read")

	got, rev, _, err := s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, r2, rev)
	assert.Equal(t, 3, got.Spec.Replicas)
	assert.Equal(t, 1, got.Status.Ready)
	assert.Equal(t, int64(2), got.Generation, "created at 1, one spec change")

	_, _, err = informer.Update(ctx, s, "absent", func(w *Widget) error { return nil })
	assert.ErrorIs(t, err, informer.ErrNotFound)
}

// RequestDelete of an object with a finalizer marks it (deletionTimestamp,
// read back as DeletionRequested) and leaves it; the Update that removes
// the last finalizer deletes it, through Finalize as a controller would.
func TestRequestDeleteShouldMarkAnObjectWithFinalizersAndFinalizeShouldDeleteIt(t *testing.T) {
	s := widgets(t, restConfig(t))
	ctx := t.Context()

	_, _, err := informer.CreateOrUpdate(ctx, s, "w", func(w *Widget) error {
		w.Spec.Replicas = 1
		w.AddFinalizer(finalizer)
		return nil
	})
	require.NoError(t, err)

	_, op, err := informer.RequestDelete(ctx, s, "w")
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op, "an object with a finalizer is marked, not deleted")
	got, markRev, ok, err := s.Get(ctx, "w")
	require.NoError(t, err)
	require.True(t, ok, "the object stays while it has a finalizer")
	assert.True(t, got.Deleting(), "deletionTimestamp is DeletionRequested")
	assert.Equal(t, []string{finalizer}, got.Finalizers)
	assert.Equal(t, int64(2), got.Generation, "the server bumps the generation on a graceful deletion, as the helpers do")

	_, op, err = informer.RequestDelete(ctx, s, "w")
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op, "a second request writes nothing")

	cleaned := false
	live, err := informer.Finalize(ctx, s, "w", &got, finalizer, func(context.Context) (bool, error) {
		cleaned = true
		return true, nil
	})
	require.NoError(t, err)
	assert.False(t, live)
	assert.True(t, cleaned, "Finalize ran the cleanup")
	_, _, ok, err = s.Get(ctx, "w")
	require.NoError(t, err)
	assert.False(t, ok, "removing the last finalizer deleted the object")
	assert.Positive(t, markRev)

	// Without finalizers RequestDelete deletes at once.
	_, err = s.Create(ctx, "plain", Widget{Spec: WidgetSpec{Replicas: 1}})
	require.NoError(t, err)
	_, op, err = informer.RequestDelete(ctx, s, "plain")
	require.NoError(t, err)
	assert.Equal(t, informer.Deleted, op)
	_, _, ok, err = s.Get(ctx, "plain")
	require.NoError(t, err)
	assert.False(t, ok)
}

// A raw Delete removes an object whatever its finalizers, as every
// converge store's Delete, and returns the revision its DELETED event has.
func TestDeleteShouldRemoveAnObjectWithFinalizers(t *testing.T) {
	s := widgets(t, restConfig(t))
	ctx := t.Context()
	w := Widget{Spec: WidgetSpec{Replicas: 1}}
	w.AddFinalizer(finalizer)
	rev, err := s.Create(ctx, "w", w)
	require.NoError(t, err)

	_, err = s.Delete(ctx, "w", rev-1)
	require.True(t, errors.Is(err, informer.ErrConflict), "a stale revision: %v", err)
	d, err := s.Delete(ctx, "w", rev)
	require.NoError(t, err)
	assert.Greater(t, d, rev)
	_, _, ok, err := s.Get(ctx, "w")
	require.NoError(t, err)
	assert.False(t, ok, "Delete removed the object with a finalizer")
}
