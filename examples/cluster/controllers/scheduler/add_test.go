package scheduler

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

var errBound = errors.New("bound")

func TestAddShouldRunTheSchedulerInAManager(t *testing.T) {
	st := must.Do(api.NewMemoryStores())
	c := &api.Cluster{Stores: st, Informers: must.Do(api.NewInformers(st)), Timings: api.FastTimings()}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{})
	require.NoError(t, err)
	require.NoError(t, Add(m, c))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = st.Nodes.Create(ctx, "n1", readyNode("n1", "2", "4Gi"))
	require.NoError(t, err)
	_, err = st.Pods.Create(ctx, "default/web", reqPod("web", "1", "1Gi"))
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()

	err = st.Pods.Watch(ctx, 0, func(e informer.Event[string, api.Pod]) error {
		if e.Type == informer.Put && e.Value.Spec.NodeName == "n1" {
			return errBound
		}
		return nil
	})
	assert.ErrorIs(t, err, errBound, "the pod is bound to the node")
	stop()
	require.NoError(t, <-done)
}
