package garbagecollector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startGC(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	g, err := New(c.Cluster, Options{Controller: c.H.Options()})
	require.NoError(t, err)
	c.H.Add(g)
}

func ref(kind, name, uid string, block bool) api.OwnerReference {
	return api.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: true, BlockOwnerDeletion: block}
}

// seed puts a Deployment web, its ReplicaSet web-1 and two pods, each
// owned by the one before, blocking its deletion.
func seed(c *clustertest.Cluster) {
	var d api.Deployment
	d.Name, d.Namespace, d.UID = "web", "default", "u-d"
	c.Deployments.Put("default/web", d)
	var rs api.ReplicaSet
	rs.Name, rs.Namespace, rs.UID = "web-1", "default", "u-rs"
	rs.OwnerReferences = []api.OwnerReference{ref("Deployment", "web", "u-d", true)}
	c.ReplicaSets.Put("default/web-1", rs)
	for _, n := range []string{"web-1-a", "web-1-b"} {
		c.Pods.Put("default/"+n, pod(n, ref("ReplicaSet", "web-1", "u-rs", true)))
	}
}

func pod(name string, refs ...api.OwnerReference) api.Pod {
	var p api.Pod
	p.Name, p.Namespace, p.UID, p.OwnerReferences = name, "default", "u-"+name, refs
	return p
}

// deleteWith deletes key as `ctl delete --cascade=policy` does: the
// policy's finalizer first, then the deletion request.
func deleteWith[V any, P interface {
	*V
	object.Object
}](t *testing.T, c *clustertest.Cluster, s informer.Store[string, V], key, finalizer string) {
	t.Helper()
	if finalizer != "" {
		_, _, err := informer.Update(c.Ctx(), s, key, func(v *V) error {
			P(v).ObjectMeta().AddFinalizer(finalizer)
			return nil
		})
		require.NoError(t, err)
	}
	_, _, err := informer.RequestDelete(c.Ctx(), s, key)
	require.NoError(t, err)
}

func has[V any](t *testing.T, c *clustertest.Cluster, s informer.Store[string, V], key string) bool {
	t.Helper()
	_, _, ok, err := s.Get(c.Ctx(), key)
	require.NoError(t, err)
	return ok
}

func TestABackgroundDeleteShouldDeleteTheOwnerAtOnceAndItsDependentsAfter(t *testing.T) {
	c := clustertest.New(t)
	seed(c)
	startGC(t, c)
	c.Settle()
	require.True(t, has(t, c, c.Stores.Pods, "default/web-1-a"), "owned pods of a live owner stay")

	deleteWith[api.Deployment](t, c, c.Stores.Deployments, "default/web", "")
	assert.False(t, has(t, c, c.Stores.Deployments, "default/web"), "the owner goes at once")
	c.Settle()
	assert.False(t, has(t, c, c.Stores.ReplicaSets, "default/web-1"))
	assert.Empty(t, c.AllPods(), "and the dependents' dependents")
}

func TestAForegroundDeleteShouldKeepTheOwnerUntilItsBlockingDependentsAreGone(t *testing.T) {
	c := clustertest.New(t)
	seed(c)
	// A pod that cannot go yet: a finalizer of someone else's holds it.
	c.UpdatePod("default/web-1-a", func(p *api.Pod) { p.AddFinalizer("example.com/hold") })
	startGC(t, c)
	c.Settle()

	deleteWith[api.Deployment](t, c, c.Stores.Deployments, "default/web", api.FinalizerForeground)
	c.Settle()
	d := c.Deployment("default/web")
	assert.True(t, d.Deleting())
	rs := c.RS("default/web-1")
	assert.True(t, rs.Deleting(), "the ReplicaSet is deleted in foreground too: it has dependents")
	assert.True(t, rs.HasFinalizer(api.FinalizerForeground))
	assert.False(t, has(t, c, c.Stores.Pods, "default/web-1-b"), "the free pod is gone")
	assert.True(t, c.Pod("default/web-1-a").Deleting(), "the held pod is going")

	c.UpdatePod("default/web-1-a", func(p *api.Pod) { p.RemoveFinalizer("example.com/hold") })
	c.Settle()
	assert.Empty(t, c.AllPods())
	assert.False(t, has(t, c, c.Stores.ReplicaSets, "default/web-1"))
	assert.False(t, has(t, c, c.Stores.Deployments, "default/web"), "last, the owner")
}

func TestADependentWithoutBlockOwnerDeletionShouldNotHoldAForegroundDelete(t *testing.T) {
	c := clustertest.New(t)
	var rs api.ReplicaSet
	rs.Name, rs.Namespace, rs.UID = "web-1", "default", "u-rs"
	c.ReplicaSets.Put("default/web-1", rs)
	p := pod("free", ref("ReplicaSet", "web-1", "u-rs", false))
	p.Finalizers = []string{"example.com/hold"}
	c.Pods.Put("default/free", p)
	startGC(t, c)
	c.Settle()

	deleteWith[api.ReplicaSet](t, c, c.Stores.ReplicaSets, "default/web-1", api.FinalizerForeground)
	c.Settle()
	assert.False(t, has(t, c, c.Stores.ReplicaSets, "default/web-1"), "not blocked")
	assert.True(t, c.Pod("default/free").Deleting(), "the dependent is deleted all the same")
}

func TestAnOrphanDeleteShouldStripTheOwnerReferencesAndLeaveTheDependents(t *testing.T) {
	c := clustertest.New(t)
	seed(c)
	startGC(t, c)
	c.Settle()

	deleteWith[api.Deployment](t, c, c.Stores.Deployments, "default/web", api.FinalizerOrphan)
	c.Settle()
	assert.False(t, has(t, c, c.Stores.Deployments, "default/web"), "the owner goes once its dependents are orphaned")
	rs := c.RS("default/web-1")
	assert.Empty(t, rs.OwnerReferences)
	assert.False(t, rs.Deleting())
	assert.Len(t, c.AllPods(), 2, "the ReplicaSet's own dependents are untouched")
	assert.Equal(t, "u-rs", c.Pod("default/web-1-a").OwnerReferences[0].UID)
}

func TestADependentWhoseOwnerUIDIsNotFoundShouldBeDeleted(t *testing.T) {
	c := clustertest.New(t)
	var rs api.ReplicaSet
	rs.Name, rs.Namespace, rs.UID = "web-1", "default", "u-new" // a namesake of the pods' owner
	c.ReplicaSets.Put("default/web-1", rs)
	c.Pods.Put("default/old", pod("old", ref("ReplicaSet", "web-1", "u-old", true)))
	c.Pods.Put("default/new", pod("new", ref("ReplicaSet", "web-1", "u-new", true)))
	c.Pods.Put("default/lost", pod("lost", ref("ReplicaSet", "never-was", "u-x", true)))
	startGC(t, c)
	c.Settle()
	assert.False(t, has(t, c, c.Stores.Pods, "default/old"), "its owner's UID is gone, whatever has the name now")
	assert.False(t, has(t, c, c.Stores.Pods, "default/lost"))
	assert.True(t, has(t, c, c.Stores.Pods, "default/new"))
}

func TestADependentWithAnotherLiveOwnerShouldOnlyLoseTheReferenceToTheGoneOne(t *testing.T) {
	c := clustertest.New(t)
	var rs api.ReplicaSet
	rs.Name, rs.Namespace, rs.UID = "keeper", "default", "u-keeper"
	c.ReplicaSets.Put("default/keeper", rs)
	other := ref("ReplicaSet", "keeper", "u-keeper", false)
	other.Controller = false
	c.Pods.Put("default/shared", pod("shared", ref("ReplicaSet", "gone", "u-gone", true), other))
	startGC(t, c)
	c.Settle()
	p := c.Pod("default/shared")
	assert.Equal(t, []api.OwnerReference{other}, p.OwnerReferences)
	assert.False(t, p.Deleting())
}

func TestAReferenceToAKindTheClusterDoesNotHaveShouldBeLeftAlone(t *testing.T) {
	c := clustertest.New(t)
	c.Pods.Put("default/job-pod", pod("job-pod", ref("Job", "batch", "u-job", true)))
	startGC(t, c)
	c.Settle()
	assert.True(t, has(t, c, c.Stores.Pods, "default/job-pod"))
}

func TestTheCollectorShouldWorkOnWhicheverKindsTheClusterHas(t *testing.T) {
	c := clustertest.New(t)
	c.Informers.Deployments, c.Informers.ReplicaSets = nil, nil // pods and nodes only
	var n api.Node
	n.Name, n.UID = "n1", "u-n1"
	c.Stores.Nodes.(interface {
		Put(string, api.Node) informer.Revision
	}).Put("n1", n)
	c.Pods.Put("default/on-n1", pod("on-n1", api.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u-n1"}))
	startGC(t, c)
	c.Settle()
	require.True(t, has(t, c, c.Stores.Pods, "default/on-n1"))

	_, err := c.Stores.Nodes.Delete(c.Ctx(), "n1", 0)
	require.NoError(t, err)
	c.Settle()
	assert.False(t, has(t, c, c.Stores.Pods, "default/on-n1"), "a cluster-scoped owner, found by name alone")
}

// Objects written without UIDs (by hand, or by a test) are told apart by
// kind and name: deleting one owner concerns its own dependents only.
func TestOwnersWithoutUIDsShouldBeToldApartByKindAndName(t *testing.T) {
	c := clustertest.New(t)
	for _, n := range []string{"a", "b"} {
		var rs api.ReplicaSet
		rs.Name, rs.Namespace = n, "default"
		c.ReplicaSets.Put("default/"+n, rs)
		p := pod(n+"-pod", ref("ReplicaSet", n, "", true))
		p.UID = ""
		p.Finalizers = []string{"example.com/hold"} // keeps them, deleted or not
		c.Pods.Put("default/"+n+"-pod", p)
	}
	startGC(t, c)
	c.Settle()

	deleteWith[api.ReplicaSet](t, c, c.Stores.ReplicaSets, "default/a", api.FinalizerOrphan)
	c.Settle()
	assert.Empty(t, c.Pod("default/a-pod").OwnerReferences, "a's pod is orphaned")
	assert.Len(t, c.Pod("default/b-pod").OwnerReferences, 1, "b's pod keeps its owner")
	assert.False(t, has(t, c, c.Stores.ReplicaSets, "default/a"))

	deleteWith[api.ReplicaSet](t, c, c.Stores.ReplicaSets, "default/b", api.FinalizerForeground)
	c.Settle()
	assert.True(t, c.Pod("default/b-pod").Deleting(), "b's pod is being deleted")
	assert.False(t, c.Pod("default/a-pod").Deleting(), "the orphan is not")
	assert.True(t, c.RS("default/b").Deleting(), "b waits for its held pod")
}
