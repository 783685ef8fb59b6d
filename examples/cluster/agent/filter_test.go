package agent

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestNodePodsShouldHoldOnlyTheNodesPods(t *testing.T) {
	st := must.Do(memstore.New[string, api.Pod]())
	on := func(node string) api.Pod { return api.Pod{Spec: api.PodSpec{NodeName: node}} }
	ctx := t.Context()
	_, err := st.Create(ctx, "default/a", on("n1"))
	require.NoError(t, err)
	rev, err := st.Create(ctx, "default/b", on("n2"))
	require.NoError(t, err)
	src := nodePods{src: st, node: "n1"}
	entries, _, err := src.List(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "default/a", entries[0].Key)

	_, err = st.Update(ctx, "default/b", on("n1"), rev) // bound here
	require.NoError(t, err)
	_, _, err = informer.Update(ctx, st, "default/a", func(p *api.Pod) error { p.Spec.NodeName = "n3"; return nil }) // and away
	require.NoError(t, err)
	var got []string
	stop := errors.New("stop")
	err = src.Watch(ctx, rev, func(ev informer.Event[string, api.Pod]) error {
		got = append(got, ev.Type.String()+" "+ev.Key)
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, []string{"Put default/b", "Delete default/a"}, got)
}
