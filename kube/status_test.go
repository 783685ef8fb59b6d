package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
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

// specOnly is a Widget as a writer that knows only its spec sees it.
type specOnly struct {
	Spec WidgetSpec `json:"spec"`
}

// A value type without a status leaves the object's status alone: writing
// "no status" would wipe what the controller recorded.
func TestAnUpdateOfAValueWithoutStatusShouldKeepTheObjectsStatus(t *testing.T) {
	cfg := restConfig(t)
	s := widgets(t, cfg)
	_, err := s.Create(t.Context(), "w", Widget{Spec: WidgetSpec{Replicas: 1}, Status: WidgetStatus{Ready: 5}})
	require.NoError(t, err)
	specs, err := kube.New[specOnly](cfg, widgetsGVR, kube.WithNamespace[specOnly](s.Namespace()))
	require.NoError(t, err)
	_, _, err = informer.Update(t.Context(), specs, "w", func(v *specOnly) error {
		v.Spec.Replicas = 2
		return nil
	})
	require.NoError(t, err)
	got, _, _, err := s.Get(t.Context(), "w")
	require.NoError(t, err)
	assert.Equal(t, WidgetSpec{Replicas: 2}, got.Spec)
	assert.Equal(t, WidgetStatus{Ready: 5}, got.Status, "the status stays")
}
