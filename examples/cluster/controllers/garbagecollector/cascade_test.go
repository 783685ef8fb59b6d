package garbagecollector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/deployment"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/examples/cluster/controllers/replicaset"
	"github.com/converge-go/converge/informer"
)

// withControllers is a cluster running the three workload controllers
// with a 3-replica Deployment web, its pods bound and ready.
func withControllers(t *testing.T) *clustertest.Cluster {
	t.Helper()
	c := clustertest.New(t)
	rs, err := replicaset.New(c.Cluster, replicaset.Options{Controller: c.H.Options()})
	require.NoError(t, err)
	c.H.Add(rs)
	d, err := deployment.New(c.Cluster, deployment.Options{Controller: c.H.Options()})
	require.NoError(t, err)
	c.H.Add(d)
	startGC(t, c)

	var web api.Deployment
	web.Name, web.Namespace, web.UID = "web", "default", api.NewUID()
	three := int32(3)
	web.Spec.Replicas = &three
	web.Spec.Selector.MatchLabels = map[string]string{"app": "web"}
	web.Spec.Template.Metadata.Labels = map[string]string{"app": "web"}
	web.Spec.Template.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker"}}}
	c.Deployments.Put("default/web", web)
	for range 10 {
		c.Settle()
		if c.BindAndReadyAll("n1") == 0 {
			break
		}
	}
	require.Len(t, c.AllPods(), 3)
	return c
}

func replicaSetCount(t *testing.T, c *clustertest.Cluster) int {
	es, _, err := c.ReplicaSets.List(c.Ctx())
	require.NoError(t, err)
	return len(es)
}

func TestDeletingADeploymentInTheBackgroundShouldLeaveNoReplicaSetAndNoPod(t *testing.T) {
	c := withControllers(t)
	deleteWith[api.Deployment](t, c, c.Stores.Deployments, "default/web", "")
	c.Settle()
	assert.Zero(t, replicaSetCount(t, c))
	assert.Empty(t, c.AllPods(), "no pod is recreated either: the ReplicaSet went before its pods")
}

func TestDeletingADeploymentInTheForegroundShouldLeaveNothing(t *testing.T) {
	c := withControllers(t)
	deleteWith[api.Deployment](t, c, c.Stores.Deployments, "default/web", api.FinalizerForeground)
	c.Settle()
	assert.Empty(t, c.AllPods())
	assert.Zero(t, replicaSetCount(t, c))
	assert.False(t, has(t, c, c.Stores.Deployments, "default/web"))
}

func TestOrphaningADeploymentShouldLeaveItsReplicaSetRunningItsPods(t *testing.T) {
	c := withControllers(t)
	pods := c.AllPods()
	deleteWith[api.Deployment](t, c, c.Stores.Deployments, "default/web", api.FinalizerOrphan)
	c.Settle()
	assert.False(t, has(t, c, c.Stores.Deployments, "default/web"))
	es, _, err := c.ReplicaSets.List(c.Ctx())
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Empty(t, es[0].Value.OwnerReferences)
	assert.Equal(t, pods, c.AllPods(), "the same pods, untouched")

	_, _, err = informer.Update(c.Ctx(), c.Stores.ReplicaSets, es[0].Key, func(rs *api.ReplicaSet) error {
		one := int32(1)
		rs.Spec.Replicas = &one
		return nil
	})
	require.NoError(t, err)
	c.Settle()
	assert.Len(t, c.AllPods(), 1, "the orphaned ReplicaSet still keeps its replicas")
}
