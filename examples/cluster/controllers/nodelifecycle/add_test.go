package nodelifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

var errCollected = errors.New("collected")

func TestAddShouldRunTheControllersInAManager(t *testing.T) {
	st := must.Do(api.NewMemoryStores())
	c := &api.Cluster{Stores: st, Informers: must.Do(api.NewInformers(st)), Timings: api.FastTimings()}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{})
	require.NoError(t, err)
	require.NoError(t, Add(m, c))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var orphan api.Pod
	orphan.Name, orphan.Namespace, orphan.UID = "web", "default", "u"
	orphan.Spec.NodeName = "gone"
	_, err = st.Pods.Create(ctx, "default/web", orphan)
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()

	err = st.Pods.Watch(ctx, 0, func(e informer.Event[string, api.Pod]) error {
		if e.Type == informer.Delete && e.Key == "default/web" {
			return errCollected
		}
		return nil
	})
	assert.ErrorIs(t, err, errCollected, "the pod of a node that does not exist is deleted")
	stop()
	require.NoError(t, <-done)
}
