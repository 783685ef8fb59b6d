package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A PUT of an object with a status subresource ignores .status, and a POST
// resets it: the Store writes the status half with a second PUT, so that
// what is read back is what was written.
func TestCreateAndUpdateShouldWriteSpecAndStatusOfAResourceWithAStatusSubresource(t *testing.T) {
	s := widgets(t, restConfig(t))
	ctx := t.Context()

	r1, err := s.Create(ctx, "w", Widget{Spec: WidgetSpec{Replicas: 1}, Status: WidgetStatus{Ready: 1}})
	require.NoError(t, err)
	got, rev, ok, err := s.Get(ctx, "w")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, r1, rev, "Create returns the revision of its last write")
	assert.Equal(t, WidgetSpec{Replicas: 1}, got.Spec)
	assert.Equal(t, WidgetStatus{Ready: 1}, got.Status, "the status given to Create")
	assert.Equal(t, int64(1), got.Generation, "generation, from the server")

	next := got
	next.Spec.Replicas, next.Status.Ready = 2, 2
	r2, err := s.Update(ctx, "w", next, rev)
	require.NoError(t, err)
	got, rev, _, err = s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, r2, rev)
	assert.Equal(t, WidgetSpec{Replicas: 2}, got.Spec)
	assert.Equal(t, WidgetStatus{Ready: 2}, got.Status, "an Update of spec and status writes both")
	assert.Equal(t, int64(2), got.Generation, "the server bumps the generation on a spec change")

	next = got
	next.Status = WidgetStatus{Ready: 3, ObservedGeneration: 2}
	r3, err := s.Update(ctx, "w", next, rev)
	require.NoError(t, err)
	assert.Greater(t, r3, rev)
	got, _, _, err = s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, WidgetStatus{Ready: 3, ObservedGeneration: 2}, got.Status, "a status-only Update")
	assert.Equal(t, int64(2), got.Generation, "a status write keeps the generation")
}
