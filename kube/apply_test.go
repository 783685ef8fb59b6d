package kube_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
)

// Server-side apply creates the object, writes its status half too, and
// records the field manager; another manager's different value for an
// owned field is a conflict unless forced.
func TestApplyShouldMergeAsFieldManagerAndConflictOnAnotherManagersField(t *testing.T) {
	cfg := restConfig(t)
	s := widgets(t, cfg)
	ctx := t.Context()

	r1, err := s.Apply(ctx, "w", Widget{Spec: WidgetSpec{Replicas: 3}, Status: WidgetStatus{Ready: 1}}, "mgr-a", false)
	require.NoError(t, err)
	got, rev, ok, err := s.Get(ctx, "w")
	require.NoError(t, err)
	require.True(t, ok, "Apply creates")
	assert.Equal(t, r1, rev)
	assert.Equal(t, WidgetSpec{Replicas: 3}, got.Spec)
	assert.Equal(t, WidgetStatus{Ready: 1}, got.Status, "the status half is applied too")

	raw, err := kube.New[json.RawMessage](cfg, widgetsGVR, kube.WithNamespace[json.RawMessage](s.Namespace()))
	require.NoError(t, err)
	data, _, _, err := raw.Get(ctx, "w")
	require.NoError(t, err)
	var obj struct {
		Metadata struct {
			ManagedFields []struct {
				Manager string `json:"manager"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(data, &obj))
	require.NotEmpty(t, obj.Metadata.ManagedFields)
	for _, f := range obj.Metadata.ManagedFields {
		assert.Equal(t, "mgr-a", f.Manager)
	}

	_, err = s.Apply(ctx, "w", Widget{Spec: WidgetSpec{Replicas: 4}}, "mgr-b", false)
	require.ErrorIs(t, err, informer.ErrConflict, "spec.replicas is mgr-a's")
	_, err = s.Apply(ctx, "w", Widget{Spec: WidgetSpec{Replicas: 4}}, "mgr-b", true)
	require.NoError(t, err, "forced")
	got, _, _, err = s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, 4, got.Spec.Replicas)

	_, err = s.Apply(ctx, "w", Widget{}, "", false)
	assert.ErrorContains(t, err, "empty field manager")
}
