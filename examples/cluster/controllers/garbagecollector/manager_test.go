package garbagecollector

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/deployment"
	"github.com/converge-go/converge/examples/cluster/controllers/replicaset"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// The control plane's way: every controller's Add on one Manager, over
// one set of informers that they share.
func TestTheWorkloadControllersAddedToOneManagerShouldRunADeploymentAndCascadeItsDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		stores := must.Do(api.NewMemoryStores())
		sink := must.Do(events.NewMemorySink(0))
		c := &api.Cluster{
			Stores:    stores,
			Informers: must.Do(api.NewInformers(stores, informer.WithLogger(logger))),
			Timings:   api.FastTimings(),
			Clock:     clock.RealClock{}, // virtual in the bubble
			Recorder: func(component string) *events.Recorder {
				r := must.Do(events.NewRecorder(component, events.WithSink(sink)))
				return r
			},
			Logger: logger,
		}
		m, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: logger})
		require.NoError(t, err)
		require.NoError(t, replicaset.Add(m, c))
		require.NoError(t, deployment.Add(m, c))
		require.NoError(t, Add(m, c))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()

		var d api.Deployment
		d.Name, d.Namespace, d.UID = "web", "default", api.NewUID()
		three := int32(3)
		d.Spec.Replicas = &three
		d.Spec.Selector.MatchLabels = map[string]string{"app": "web"}
		d.Spec.Template.Metadata.Labels = map[string]string{"app": "web"}
		d.Spec.Template.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker"}}}
		_, err = stores.Deployments.Create(ctx, "default/web", d)
		require.NoError(t, err)
		synctest.Wait()

		pods, _, err := stores.Pods.List(ctx)
		require.NoError(t, err)
		assert.Len(t, pods, 3)
		rss, _, err := stores.ReplicaSets.List(ctx)
		require.NoError(t, err)
		assert.Len(t, rss, 1)
		assert.NotEmpty(t, sink.Events("default/web"), "the Deployment's events are recorded")
		writes := map[string]informer.Revision{}
		for kind, s := range map[string]interface{ Revision() informer.Revision }{
			"deployments": stores.Deployments.(interface{ Revision() informer.Revision }),
			"replicasets": stores.ReplicaSets.(interface{ Revision() informer.Revision }),
			"pods":        stores.Pods.(interface{ Revision() informer.Revision }),
		} {
			writes[kind] = s.Revision()
		}
		t.Logf("store writes for one 3-replica Deployment, no node agent: %v", writes)
		assert.LessOrEqual(t, writes["deployments"]+writes["replicasets"]+writes["pods"], informer.Revision(12),
			"a handful of writes, no write loop (Kubernetes makes 22 API writes here, binds and events included)")

		_, _, err = informer.RequestDelete(ctx, stores.Deployments, "default/web")
		require.NoError(t, err)
		synctest.Wait()
		pods, _, _ = stores.Pods.List(ctx)
		rss, _, _ = stores.ReplicaSets.List(ctx)
		assert.Empty(t, pods)
		assert.Empty(t, rss)

		cancel()
		require.NoError(t, <-done)
	})
}
