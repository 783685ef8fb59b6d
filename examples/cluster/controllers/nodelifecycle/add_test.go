package nodelifecycle

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/informer"
)

var errCollected = errors.New("collected")

func TestAddShouldRunTheControllersInAManager(t *testing.T) {
	st, ctx := clustertest.RunManager(t, Add)
	var orphan api.Pod
	orphan.Name, orphan.Namespace, orphan.UID = "web", "default", "u"
	orphan.Spec.NodeName = "gone"
	_, err := st.Pods.Create(ctx, "default/web", orphan)
	require.NoError(t, err)

	err = st.Pods.Watch(ctx, 0, func(e informer.Event[string, api.Pod]) error {
		if e.Type == informer.Delete && e.Key == "default/web" {
			return errCollected
		}
		return nil
	})
	assert.ErrorIs(t, err, errCollected, "the pod of a node that does not exist is deleted")
}
