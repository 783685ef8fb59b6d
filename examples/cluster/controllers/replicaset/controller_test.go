package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start adds the controller to c, with names the test can predict.
func start(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	var n atomic.Int64
	ctrl, err := New(c.Cluster, Options{
		Suffix:     func() string { return fmt.Sprintf("p%04d", n.Add(1)) },
		Controller: c.H.Options(),
	})
	require.NoError(t, err)
	c.H.Add(ctrl)
}

func newRS(name string, replicas int32) api.ReplicaSet {
	labels := map[string]string{"app": name}
	return api.ReplicaSet{
		Metadata: api.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + name},
		Spec: api.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{
				Metadata: api.TemplateMeta{Labels: map[string]string{"app": name, "tier": "web"}},
				Spec:     api.PodSpec{Containers: []api.Container{{Name: "c", Command: []string{"cluster", "worker"}}}},
			},
		},
	}
}

func setReplicas(t *testing.T, c *clustertest.Cluster, key string, n int32) {
	t.Helper()
	_, _, err := informer.Update(c.Ctx(), c.ReplicaSets, key, func(rs *api.ReplicaSet) error {
		rs.Spec.Replicas = &n
		return nil
	})
	require.NoError(t, err)
}

func TestAReplicaSetShouldCreateItsReplicasAsPodsNamedAfterItAndOwnedByIt(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	c.ReplicaSets.Put("default/web", newRS("web", 3))
	c.Settle()

	pods := c.PodsOf("web")
	require.Len(t, pods, 3)
	uids := map[string]bool{}
	for _, e := range pods {
		p := e.Value
		assert.Regexp(t, `^default/web-p\d{4}$`, e.Key)
		assert.Equal(t, map[string]string{"app": "web", "tier": "web"}, p.Labels, "the template's labels")
		assert.Equal(t, []api.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "uid-web",
			Controller: true, BlockOwnerDeletion: true}}, p.OwnerReferences)
		assert.NotEmpty(t, p.UID)
		assert.False(t, uids[p.UID], "a fresh UID per pod")
		uids[p.UID] = true
		assert.Equal(t, []string{"cluster", "worker"}, p.Spec.Containers[0].Command)
		assert.Equal(t, c.H.Clock.Now().UTC(), p.CreationTimestamp)
	}
	assert.Equal(t, []string{EventSuccessfulCreate, EventSuccessfulCreate, EventSuccessfulCreate}, c.EventReasons("default/web"))
	rs := c.RS("default/web")
	assert.Equal(t, int32(3), rs.Status.Replicas)
	assert.Equal(t, int32(3), rs.Status.FullyLabeledReplicas)
	assert.Equal(t, rs.Generation, rs.Status.ObservedGeneration)
}

func TestTheDefaultPodNameSuffixShouldBeFiveLowercaseAlphanumerics(t *testing.T) {
	for range 100 {
		assert.Regexp(t, `^[bcdfghjklmnpqrstvwxz2456789]{5}$`, Suffix())
	}
}

// failingPods fails every pod Create while fail is set, counting the
// attempts.
type failingPods struct {
	informer.Store[string, api.Pod]
	fail     atomic.Bool
	attempts atomic.Int64
}

func (f *failingPods) Create(ctx context.Context, key string, p api.Pod) (informer.Revision, error) {
	f.attempts.Add(1)
	if f.fail.Load() {
		return 0, errors.New("quota exceeded")
	}
	return f.Store.Create(ctx, key, p)
}

func TestFailingCreatesShouldStopAtTheFirstSlowStartBatchAndSetReplicaFailureUntilTheyWork(t *testing.T) {
	c := clustertest.New(t)
	fp := &failingPods{Store: c.Stores.Pods}
	fp.fail.Store(true)
	c.Stores.Pods = fp
	start(t, c)
	c.ReplicaSets.Put("default/web", newRS("web", 10))
	c.Settle()

	// Each sync's first batch is one create, which fails: no second batch.
	// Two syncs: the first, and the one its status write triggers.
	assert.LessOrEqual(t, fp.attempts.Load(), int64(2), "one create per sync, not ten")
	assert.Empty(t, c.PodsOf("web"))
	cond, ok := object.FindCondition(c.RS("default/web").Status.Conditions, api.ReplicaSetReplicaFailure)
	require.True(t, ok)
	assert.Equal(t, object.ConditionTrue, cond.Status)
	assert.Equal(t, ReasonFailedCreate, cond.Reason)
	assert.Contains(t, cond.Message, "quota exceeded")
	assert.Contains(t, c.EventReasons("default/web"), EventFailedCreate)

	fp.fail.Store(false)
	c.Step(time.Minute) // past the retry's backoff
	assert.Len(t, c.PodsOf("web"), 10)
	_, ok = object.FindCondition(c.RS("default/web").Status.Conditions, api.ReplicaSetReplicaFailure)
	assert.False(t, ok, "the condition goes once creates work")
}

// undeletablePods fails every pod Delete.
type undeletablePods struct {
	informer.Store[string, api.Pod]
}

func (undeletablePods) Delete(context.Context, string, informer.Revision) (informer.Revision, error) {
	return 0, errors.New("the store is read-only")
}

func TestFailingDeletesShouldSetReplicaFailureWithFailedDelete(t *testing.T) {
	c := clustertest.New(t)
	c.Stores.Pods = undeletablePods{c.Stores.Pods}
	start(t, c)
	c.ReplicaSets.Put("default/web", newRS("web", 2))
	c.Settle()
	require.Len(t, c.PodsOf("web"), 2)

	setReplicas(t, c, "default/web", 1)
	c.Settle()
	assert.Len(t, c.PodsOf("web"), 2, "the delete failed")
	cond, ok := object.FindCondition(c.RS("default/web").Status.Conditions, api.ReplicaSetReplicaFailure)
	require.True(t, ok)
	assert.Equal(t, ReasonFailedDelete, cond.Reason)
	assert.Contains(t, cond.Message, "read-only")
	assert.Contains(t, c.EventReasons("default/web"), EventFailedDelete)
}

func TestSlowStartBatchShouldDoubleTheBatchAndStopAfterTheFirstBatchWithAnError(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		count, failAt          int // failAt: the call that fails (1-based), 0 none
		wantCalls, wantSuccess int
	}{
		{"all succeed", 10, 0, 10, 10},
		{"first fails", 10, 1, 1, 0},
		{"second batch's second call fails", 10, 3, 3, 2},
		{"third batch's first call fails: the batch finishes", 10, 4, 7, 6},
		{"nothing to do", 0, 0, 0, 0},
		{"a last batch cut to what remains", 5, 0, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			ok, err := SlowStartBatch(tc.count, 1, func() error {
				calls++
				if calls == tc.failAt {
					return errors.New("boom")
				}
				return nil
			})
			assert.Equal(t, tc.wantCalls, calls)
			assert.Equal(t, tc.wantSuccess, ok)
			assert.Equal(t, tc.failAt != 0, err != nil)
		})
	}
}

func TestOnlyActivePodsShouldCountSoFailedAndTerminatingPodsAreReplaced(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	c.ReplicaSets.Put("default/web", newRS("web", 2))
	c.Settle()
	pods := c.PodsOf("web")
	require.Len(t, pods, 2)

	c.Fail(pods[0].Key)
	// Terminating: a finalizer keeps it while its deletion is requested.
	c.UpdatePod(pods[1].Key, func(p *api.Pod) { p.AddFinalizer("example.com/hold") })
	_, _, err := informer.RequestDelete(c.Ctx(), c.Pods, pods[1].Key)
	require.NoError(t, err)
	c.Settle()

	all := c.PodsOf("web")
	assert.Len(t, all, 4, "the failed and the terminating pod stay; two replace them")
	active := 0
	for _, e := range all {
		if IsPodActive(e.Value) {
			active++
		}
	}
	assert.Equal(t, 2, active)
	assert.Equal(t, int32(2), c.RS("default/web").Status.Replicas, "status counts active pods only")
}

func TestScalingDownShouldDeleteTheLeastUsefulPodsFirst(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	c.ReplicaSets.Put("default/web", newRS("web", 4))
	c.Settle()
	pods := c.PodsOf("web")
	require.Len(t, pods, 4)
	// pods[0]: unassigned; pods[1]: assigned, Pending; pods[2]: Running,
	// not ready; pods[3]: Running and ready: the one to keep.
	c.UpdatePod(pods[1].Key, func(p *api.Pod) { p.Spec.NodeName = "n1"; p.Status.Phase = api.PodPending })
	c.UpdatePod(pods[2].Key, func(p *api.Pod) { p.Spec.NodeName = "n1" })
	c.Run(pods[2].Key)
	c.UpdatePod(pods[3].Key, func(p *api.Pod) { p.Spec.NodeName = "n2" })
	c.Ready(pods[3].Key)
	c.Settle()

	setReplicas(t, c, "default/web", 1)
	c.Settle()
	left := c.PodsOf("web")
	require.Len(t, left, 1)
	assert.Equal(t, pods[3].Key, left[0].Key)
	reasons := c.EventReasons("default/web")
	assert.Equal(t, EventSuccessfulDelete, reasons[len(reasons)-1])
}

func TestAnOrphanThatMatchesShouldBeAdoptedAndAPodThatNoLongerMatchesReleased(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	c.Pods.Put("default/stray", api.Pod{Metadata: api.ObjectMeta{Name: "stray", Namespace: "default", UID: "u-stray",
		Labels: map[string]string{"app": "web"}, CreationTimestamp: c.H.Clock.Now()}})
	c.Settle() // in the cache before the ReplicaSet is
	c.ReplicaSets.Put("default/web", newRS("web", 2))
	c.Settle()

	ref, ok := api.ControllerOf(c.Pod("default/stray").Metadata)
	require.True(t, ok, "the orphan is adopted")
	assert.Equal(t, "uid-web", ref.UID)
	assert.Len(t, c.PodsOf("web"), 1, "adopted, it counts: one more pod makes two")

	c.UpdatePod("default/stray", func(p *api.Pod) { p.Labels = map[string]string{"app": "other"} })
	c.Settle()
	assert.Empty(t, c.Pod("default/stray").OwnerReferences, "released: it no longer matches")
	assert.Len(t, c.PodsOf("web"), 2, "and replaced")
}

func TestPodsOfANamesakeWithAnotherUIDShouldNotCount(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	old := newRS("web", 1)
	old.UID = "uid-old"
	c.Pods.Put("default/web-old", api.Pod{Metadata: api.ObjectMeta{Name: "web-old", Namespace: "default",
		Labels: map[string]string{"app": "web"}, OwnerReferences: []api.OwnerReference{ControllerRef(old)}}})
	c.ReplicaSets.Put("default/web", newRS("web", 1))
	c.Settle()
	assert.Len(t, c.PodsOf("web"), 2, "the namesake's pod is not web's: web makes its own")
	assert.Equal(t, int32(1), c.RS("default/web").Status.Replicas)
}

func TestAvailableReplicasShouldCountPodsReadyForMinReadySeconds(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	rs := newRS("web", 2)
	rs.Spec.MinReadySeconds = 10
	c.ReplicaSets.Put("default/web", rs)
	c.Settle()
	c.BindAndReadyAll("n1")
	c.Settle()
	st := c.RS("default/web").Status
	assert.Equal(t, int32(2), st.ReadyReplicas)
	assert.Equal(t, int32(0), st.AvailableReplicas, "ready, not yet for 10 s")

	c.Step(9 * time.Second)
	assert.Equal(t, int32(0), c.RS("default/web").Status.AvailableReplicas)
	c.Step(time.Second)
	assert.Equal(t, int32(2), c.RS("default/web").Status.AvailableReplicas, "a requeue at the 10 s mark counts them")
}

func TestAReplicaSetBeingDeletedShouldGetNoNewPods(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	rs := newRS("web", 2)
	rs.Finalizers = []string{"foregroundDeletion"}
	rs.DeletionRequested = c.H.Clock.Now()
	c.ReplicaSets.Put("default/web", rs)
	c.Settle()
	assert.Empty(t, c.PodsOf("web"))
	assert.Equal(t, rs.Generation, c.RS("default/web").Status.ObservedGeneration)
}

func TestStatusShouldObserveTheGenerationItActedOn(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	_, _, err := informer.CreateOrUpdate(c.Ctx(), c.Stores.ReplicaSets, "default/web", func(rs *api.ReplicaSet) error {
		*rs = newRS("web", 1)
		return nil
	})
	require.NoError(t, err)
	c.Settle()
	setReplicas(t, c, "default/web", 2)
	c.Settle()
	rs := c.RS("default/web")
	assert.Equal(t, int64(2), rs.Generation)
	assert.Equal(t, int64(2), rs.Status.ObservedGeneration)
	assert.Equal(t, int32(2), rs.Status.Replicas)
}
