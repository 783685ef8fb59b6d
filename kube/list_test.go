package kube_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
)

// labeledMap is a ConfigMap with its labels, through a metadata field of
// the value's own.
type labeledMap struct {
	Metadata struct {
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Data map[string]string `json:"data,omitempty"`
}

func labeledValue(team, n string) labeledMap {
	var v labeledMap
	v.Metadata.Labels = map[string]string{"team": team}
	v.Data = map[string]string{"n": n}
	return v
}

// A Store over all namespaces keys objects "namespace/name"; a label
// selector narrows List and Watch to the objects it matches, and an object
// that stops matching is watched as deleted.
func TestAStoreOverAllNamespacesShouldKeyByNamespaceAndFilterByLabels(t *testing.T) {
	cfg := restConfig(t)
	ctx := t.Context()
	ns1, ns2 := namespace(t, cfg), namespace(t, cfg)
	all, err := kube.New[labeledMap](cfg, configMapsGVR)
	require.NoError(t, err)
	team := "t-" + ns1 // a label no other test's objects have
	_, err = all.Create(ctx, ns1+"/a", labeledValue(team, "1"))
	require.NoError(t, err)
	_, err = all.Create(ctx, ns2+"/a", labeledValue(team, "2"))
	require.NoError(t, err)
	_, err = all.Create(ctx, ns2+"/b", labeledValue("other-"+team, "3"))
	require.NoError(t, err)
	_, err = all.Create(ctx, "no-namespace", labeledValue(team, "4"))
	require.ErrorContains(t, err, "want namespace/name")

	sel, err := kube.New[labeledMap](cfg, configMapsGVR, kube.WithLabelSelector[labeledMap]("team="+team))
	require.NoError(t, err)
	entries, rev, err := sel.List(ctx)
	require.NoError(t, err)
	got := map[string]string{}
	for _, e := range entries {
		got[e.Key] = e.Value.Data["n"]
	}
	assert.Equal(t, map[string]string{ns1 + "/a": "1", ns2 + "/a": "2"}, got)

	events, done := watching[labeledMap](t, sel, rev)
	_, _, err = informer.Update(ctx, all, ns1+"/a", func(v *labeledMap) error {
		v.Metadata.Labels = map[string]string{"team": "gone-" + team}
		return nil
	})
	require.NoError(t, err)
	e := next(t, events, done)
	assert.Equal(t, informer.Delete, e.Type, "an object that stops matching the selector is watched as deleted")
	assert.Equal(t, ns1+"/a", e.Key)
}

// A cluster-scoped resource is keyed by name; WithNamespace on it is an
// error.
func TestAClusterScopedResourceShouldBeKeyedByName(t *testing.T) {
	cfg := restConfig(t)
	ns := namespace(t, cfg)
	s, err := kube.New[struct{}](cfg, namespacesGVR, kube.WithFieldSelector[struct{}]("metadata.name="+ns))
	require.NoError(t, err)
	entries, _, err := s.List(t.Context())
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, ns, entries[0].Key)

	bad, err := kube.New[struct{}](cfg, namespacesGVR, kube.WithNamespace[struct{}]("x"))
	require.NoError(t, err)
	_, _, err = bad.List(t.Context())
	assert.ErrorContains(t, err, "cluster-scoped")
}

// A paginated List reads every page at one resourceVersion; ListAuto on a
// server that cannot stream lists (this one: its etcd has no progress
// notifications) falls back to pages, and ListStreaming fails.
func TestListShouldReadPagesAndFallBackFromStreaming(t *testing.T) {
	cfg := restConfig(t)
	ns := namespace(t, cfg)
	ctx := t.Context()
	w, err := kube.New[configMap](cfg, configMapsGVR, kube.WithNamespace[configMap](ns))
	require.NoError(t, err)
	want := map[string]string{}
	for i := range 7 {
		k := fmt.Sprintf("k%d", i)
		_, err := w.Create(ctx, k, configMap{Data: map[string]string{"n": k}})
		require.NoError(t, err)
		want[k] = k
	}

	paged, err := kube.New[configMap](cfg, configMapsGVR, kube.WithNamespace[configMap](ns),
		kube.WithPageSize[configMap](2), kube.WithListMode[configMap](kube.ListPaginated))
	require.NoError(t, err)
	entries, rev, err := paged.List(ctx)
	require.NoError(t, err)
	got := map[string]string{}
	for _, e := range entries {
		got[e.Key] = e.Value.Data["n"]
		assert.LessOrEqual(t, e.Revision, rev)
	}
	assert.Equal(t, want, got, "four pages of two")
	assert.Equal(t, uint64(1), paged.Stats().PaginatedLists)

	auto, err := kube.New[configMap](cfg, configMapsGVR, kube.WithNamespace[configMap](ns))
	require.NoError(t, err)
	entries, _, err = auto.List(ctx)
	require.NoError(t, err)
	assert.Len(t, entries, 7)
	st := auto.Stats()
	assert.True(t, st.StreamingUnsupported, "this server refuses streaming lists")
	assert.Equal(t, uint64(1), st.PaginatedLists)

	streaming, err := kube.New[configMap](cfg, configMapsGVR, kube.WithNamespace[configMap](ns),
		kube.WithListMode[configMap](kube.ListStreaming))
	require.NoError(t, err)
	_, _, err = streaming.List(ctx)
	assert.Error(t, err, "ListStreaming does not fall back")
}

// The transform runs on what List and Watch hand to the informer, not on
// Get, whose value a write starts from.
func TestTransformShouldApplyToListAndWatchNotGet(t *testing.T) {
	cfg := restConfig(t)
	ns := namespace(t, cfg)
	s, err := kube.New[configMap](cfg, configMapsGVR, kube.WithNamespace[configMap](ns),
		kube.WithTransform(func(key string, v *configMap) { v.Data = map[string]string{"key": key} }))
	require.NoError(t, err)
	_, err = s.Create(t.Context(), "a", configMap{Data: map[string]string{"n": "1"}})
	require.NoError(t, err)
	entries, _, err := s.List(t.Context())
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, map[string]string{"key": "a"}, entries[0].Value.Data)
	v, _, _, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"n": "1"}, v.Data)
}
