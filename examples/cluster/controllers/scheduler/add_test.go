package scheduler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/informer"
)

var errBound = errors.New("bound")

func TestAddShouldRunTheSchedulerInAManager(t *testing.T) {
	st, ctx := clustertest.RunManager(t, Add)
	_, err := st.Nodes.Create(ctx, "n1", readyNode("n1", "2", "4Gi"))
	require.NoError(t, err)
	_, err = st.Pods.Create(ctx, "default/web", reqPod("web", "1", "1Gi"))
	require.NoError(t, err)

	err = st.Pods.Watch(ctx, 0, func(e informer.Event[string, api.Pod]) error {
		if e.Type == informer.Put && e.Value.Spec.NodeName == "n1" {
			return errBound
		}
		return nil
	})
	assert.ErrorIs(t, err, errBound, "the pod is bound to the node")
}
