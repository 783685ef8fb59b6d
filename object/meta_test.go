package object_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/object"
)

// thing embeds Meta as a user's value type does.
type thing struct {
	object.Meta
	Spec string `json:"spec"`
}

var _ object.Object = (*thing)(nil)

func TestMetaShouldBeInlinedInTheEmbeddingValuesJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := thing{Meta: object.Meta{Generation: 3, Finalizers: []string{"a"}, DeletionRequested: at}, Spec: "x"}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"generation":3,"finalizers":["a"],"deletionRequested":"2026-01-02T03:04:05Z","spec":"x"}`, string(data))

	var out thing
	require.NoError(t, json.Unmarshal(data, &out))
	assert.Equal(t, in, out)
}

func TestMetaShouldOmitItsZeroFieldsSoValuesWithoutMetadataKeepTheirStoredForm(t *testing.T) {
	data, err := json.Marshal(thing{Spec: "x"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"spec":"x"}`, string(data))

	// A value stored before Meta was embedded, with its own top-level
	// "generation", decodes into Meta.Generation.
	var out thing
	require.NoError(t, json.Unmarshal([]byte(`{"generation":7,"spec":"y"}`), &out))
	assert.Equal(t, thing{Meta: object.Meta{Generation: 7}, Spec: "y"}, out)
}

func TestObjectMetaShouldReturnTheEmbeddedMetaItself(t *testing.T) {
	var th thing
	var o object.Object = &th
	o.ObjectMeta().Generation = 4
	assert.Equal(t, int64(4), th.Generation)
}

func TestDeletingShouldFollowDeletionRequested(t *testing.T) {
	var m object.Meta
	assert.False(t, m.Deleting())
	m.DeletionRequested = time.Unix(1, 0)
	assert.True(t, m.Deleting())
}

func TestAddFinalizerShouldAppendToANewSliceLeavingTheOldOneUnchanged(t *testing.T) {
	old := make([]string, 1, 4) // spare capacity: an in-place append would show in shared
	old[0] = "a"
	shared := old[:cap(old)]
	m := object.Meta{Finalizers: old}

	require.True(t, m.AddFinalizer("b"))
	assert.Equal(t, []string{"a", "b"}, m.Finalizers)
	assert.Equal(t, []string{"a"}, old)
	assert.Empty(t, shared[1], "AddFinalizer wrote into the old backing array")
	assert.True(t, m.HasFinalizer("b"))
}

func TestAddFinalizerShouldDoNothingIfPresentOrDeleting(t *testing.T) {
	m := object.Meta{Finalizers: []string{"a"}}
	assert.False(t, m.AddFinalizer("a"))
	assert.Equal(t, []string{"a"}, m.Finalizers)

	m.DeletionRequested = time.Unix(1, 0)
	assert.False(t, m.AddFinalizer("b"), "a finalizer added after deletion was requested")
	assert.Equal(t, []string{"a"}, m.Finalizers)
}

func TestRemoveFinalizerShouldRemoveEveryOccurrenceIntoANewSlice(t *testing.T) {
	old := []string{"a", "b", "a"}
	m := object.Meta{Finalizers: old}
	require.True(t, m.RemoveFinalizer("a"))
	assert.Equal(t, []string{"b"}, m.Finalizers)
	assert.Equal(t, []string{"a", "b", "a"}, old, "the old slice")

	assert.False(t, m.RemoveFinalizer("a"), "absent")
	require.True(t, m.RemoveFinalizer("b"))
	assert.Nil(t, m.Finalizers, "no finalizer left: nil, omitted from JSON")
}

func TestRemoveFinalizerShouldWorkWhileDeleting(t *testing.T) {
	m := object.Meta{Finalizers: []string{"a"}, DeletionRequested: time.Unix(1, 0)}
	assert.True(t, m.RemoveFinalizer("a"))
	assert.Empty(t, m.Finalizers)
}
