package apiserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

func TestAdmissionShouldKeepGenerationAsTheAPIServerDoes(t *testing.T) {
	st := Admitted(must.Do(api.NewMemoryStores()), 300, clocktesting.NewFakeClock(t0))
	ctx := t.Context()
	one := int32(1)
	rs := api.ReplicaSet{Metadata: api.Metadata{Name: "web", Namespace: "default"}, Spec: api.ReplicaSetSpec{Replicas: &one,
		Selector: api.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: api.PodTemplateSpec{Metadata: api.TemplateMeta{Labels: map[string]string{"app": "web"}},
			Spec: api.PodSpec{Containers: []api.Container{{Name: "web", Command: []string{"cluster", "worker"}}}}}}}
	_, err := st.ReplicaSets.Create(ctx, "default/web", rs)
	require.NoError(t, err)
	gen := func() int64 {
		got, _, _, err := st.ReplicaSets.Get(ctx, "default/web")
		require.NoError(t, err)
		return got.Generation
	}
	assert.Equal(t, int64(1), gen(), "1 on create")
	_, _, err = informer.Update(ctx, st.ReplicaSets, "default/web", func(r *api.ReplicaSet) error {
		r.Status.Replicas, r.Generation = 1, 42
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), gen(), "a status write keeps it, whatever the writer says")
	_, _, err = informer.Update(ctx, st.ReplicaSets, "default/web", func(r *api.ReplicaSet) error {
		two := int32(2)
		r.Spec.Replicas = &two
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(2), gen(), "a spec change bumps it")
	_, _, err = informer.Update(ctx, st.ReplicaSets, "default/web", func(r *api.ReplicaSet) error {
		r.UID, r.CreationTimestamp = "forged", t0.Add(1)
		return nil
	})
	require.NoError(t, err)
	got, _, _, err := st.ReplicaSets.Get(ctx, "default/web")
	require.NoError(t, err)
	assert.NotEqual(t, "forged", got.UID, "the UID never changes")
	assert.Equal(t, t0, got.CreationTimestamp)
}
