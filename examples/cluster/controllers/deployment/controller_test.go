package deployment

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/examples/cluster/controllers/replicaset"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start adds the ReplicaSet and Deployment controllers to c.
func start(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	var n atomic.Int64
	rs, err := replicaset.New(c.Cluster, replicaset.Options{
		Suffix:     func() string { return fmt.Sprintf("p%04d", n.Add(1)) },
		Controller: c.H.Options(),
	})
	require.NoError(t, err)
	c.H.Add(rs)
	d, err := New(c.Cluster, Options{Controller: c.H.Options()})
	require.NoError(t, err)
	c.H.Add(d)
}

// running starts the controllers on a new cluster, applies d and brings
// it up.
func running(t *testing.T, d api.Deployment) *clustertest.Cluster {
	t.Helper()
	c := clustertest.New(t)
	start(t, c)
	apply(t, c, d)
	bringUp(t, c, d.Key())
	return c
}

func newDeployment(name string, replicas int32, surge, unavailable string) api.Deployment {
	var d api.Deployment
	d.Name, d.Namespace, d.UID = name, "default", "uid-"+name
	d.Spec.Replicas = &replicas
	d.Spec.Selector = api.LabelSelector{MatchLabels: map[string]string{"app": name}}
	d.Spec.Template.Metadata.Labels = map[string]string{"app": name}
	d.Spec.Template.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker", "v1"}}}
	if surge != "" || unavailable != "" {
		d.Spec.Strategy = api.DeploymentStrategy{Type: api.RollingUpdateStrategy,
			RollingUpdate: &api.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavailable}}
	}
	return d
}

// apply writes d as a user does: the write helpers keep its generation.
func apply(t *testing.T, c *clustertest.Cluster, d api.Deployment) {
	t.Helper()
	_, _, err := informer.CreateOrUpdate(c.Ctx(), c.Stores.Deployments, d.Key(), func(v *api.Deployment) error {
		if v.UID == "" {
			*v = d
			return nil
		}
		v.Spec = d.Spec
		return nil
	})
	require.NoError(t, err)
}

// setCommand changes the template's command: a new version.
func setCommand(t *testing.T, c *clustertest.Cluster, key string, version string) {
	t.Helper()
	_, _, err := informer.Update(c.Ctx(), c.Stores.Deployments, key, func(d *api.Deployment) error {
		d.Spec.Template.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker", version}}}
		return nil
	})
	require.NoError(t, err)
}

// replicaSets returns the Deployment's ReplicaSets by name.
func replicaSets(t *testing.T, c *clustertest.Cluster, prefix string) map[string]api.ReplicaSet {
	es, _, err := c.ReplicaSets.List(c.Ctx())
	require.NoError(t, err)
	out := map[string]api.ReplicaSet{}
	for _, e := range es {
		if strings.HasPrefix(e.Value.Name, prefix+"-") {
			out[e.Value.Name] = e.Value
		}
	}
	return out
}

// bringUp plays scheduler and agents until the Deployment's pods are all
// ready and its rollout is complete.
func bringUp(t *testing.T, c *clustertest.Cluster, key string) {
	t.Helper()
	for range 100 {
		c.Settle()
		if c.BindAndReadyAll("n1") == 0 && rolloutDone(c.Deployment(key)) {
			return
		}
	}
	t.Fatalf("deployment %s did not complete: %+v", key, c.Deployment(key).Status)
}

// rolloutDone is kubectl rollout status's test (rollout_status.go).
func rolloutDone(d api.Deployment) bool {
	want := api.Replicas(d.Spec.Replicas)
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want &&
		st.AvailableReplicas == want
}

func cond(d api.Deployment, typ string) object.Condition {
	c, _ := object.FindCondition(d.Status.Conditions, typ)
	return c
}

// assertVersion asserts that every pod of the Deployment runs version.
func assertVersion(t *testing.T, c *clustertest.Cluster, name, version string) {
	t.Helper()
	for _, e := range c.PodsOf(name) {
		assert.Equal(t, version, e.Value.Spec.Containers[0].Command[2], "pod %s", e.Key)
	}
}

// readyOne plays scheduler and agent for one step: it binds every pod and
// makes one that is not ready ready.
func readyOne(c *clustertest.Cluster) {
	c.Bind("n1")
	for _, e := range c.AllPods() {
		if !e.Value.IsReady() && replicaset.IsPodActive(e.Value) {
			c.Ready(e.Key)
			return
		}
	}
}

func TestADeploymentShouldRunItsPodsThroughAReplicaSetNamedAfterItsTemplateHash(t *testing.T) {
	d := newDeployment("web", 3, "", "")
	c := running(t, d)

	hash := ComputeHash(d.Spec.Template, 0)
	rss := replicaSets(t, c, "web")
	require.Len(t, rss, 1)
	rs, ok := rss["web-"+hash]
	require.True(t, ok, "named web-%s: %v", hash, rss)
	assert.Equal(t, hash, rs.Spec.Selector.MatchLabels[api.PodTemplateHashLabel])
	assert.Equal(t, hash, rs.Spec.Template.Metadata.Labels[api.PodTemplateHashLabel])
	assert.Equal(t, "1", rs.Annotations[api.RevisionAnnotation])
	assert.Equal(t, "3", rs.Annotations[api.DesiredReplicasAnnotation])
	assert.Equal(t, "4", rs.Annotations[api.MaxReplicasAnnotation], "3 + 25% surge, rounded up")
	assert.Equal(t, []api.OwnerReference{ControllerRef(c.Deployment("default/web"))}, rs.OwnerReferences)
	for _, e := range c.PodsOf("web-" + hash) {
		assert.Equal(t, hash, e.Value.Labels[api.PodTemplateHashLabel])
	}
	assert.Len(t, c.PodsOf("web-"+hash), 3)

	got := c.Deployment("default/web")
	assert.Equal(t, "1", got.Annotations[api.RevisionAnnotation])
	assert.Equal(t, api.DeploymentStatus{ObservedGeneration: got.Generation, Replicas: 3, UpdatedReplicas: 3,
		ReadyReplicas: 3, AvailableReplicas: 3, Conditions: got.Status.Conditions}, got.Status)
	assert.Equal(t, api.ReasonMinimumReplicasAvailable, cond(got, api.DeploymentAvailable).Reason)
	assert.Equal(t, api.ReasonNewReplicaSetAvailable, cond(got, api.DeploymentProgressing).Reason)
	assert.Contains(t, c.EventReasons("default/web"), EventScalingReplicaSet)
}

// bounds watches every state of the pod store and records the most pods
// and fewest available pods of one Deployment, from when it is armed.
type bounds struct {
	mu        sync.Mutex
	pods      map[string]api.Pod
	armed     bool
	most      int
	fewest    int
	sawBoth   bool // old and new version pods at once
	violation []string
	seen      informer.Revision // the last revision applied
	caughtUp  *sync.Cond        // signalled as seen moves
}

func watchBounds(t *testing.T, c *clustertest.Cluster, prefix string, maxPods, minAvailable int) *bounds {
	b := &bounds{pods: map[string]api.Pod{}, fewest: 1 << 30}
	b.caughtUp = sync.NewCond(&b.mu)
	es, rev, err := c.Pods.List(c.Ctx())
	require.NoError(t, err)
	for _, e := range es {
		b.pods[e.Key] = e.Value
	}
	b.seen = rev
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Pods.Watch(ctx, rev, func(ev informer.Event[string, api.Pod]) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			if ev.Type == informer.Delete {
				delete(b.pods, ev.Key)
			} else {
				b.pods[ev.Key] = ev.Value
			}
			b.check(prefix, maxPods, minAvailable, ev.Revision)
			b.seen = ev.Revision
			b.caughtUp.Broadcast()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

func (b *bounds) check(prefix string, maxPods, minAvailable int, rev informer.Revision) {
	if !b.armed {
		return
	}
	n, avail := 0, 0
	versions := map[string]bool{}
	for key, p := range b.pods {
		if _, name := api.SplitKey(key); !strings.HasPrefix(name, prefix+"-") || !replicaset.IsPodActive(p) {
			continue
		}
		n++
		if p.IsReady() {
			avail++
		}
		versions[p.Spec.Containers[0].Command[2]] = true
	}
	b.most, b.fewest = max(b.most, n), min(b.fewest, avail)
	b.sawBoth = b.sawBoth || len(versions) > 1
	if n > maxPods {
		b.violation = append(b.violation, fmt.Sprintf("rev %d: %d pods, at most %d allowed", rev, n, maxPods))
	}
	if avail < minAvailable {
		b.violation = append(b.violation, fmt.Sprintf("rev %d: %d available, at least %d required", rev, avail, minAvailable))
	}
}

func (b *bounds) arm() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = true
}

// result waits until the watch has applied head, the store's revision
// now, and returns what it saw.
func (b *bounds) result(head informer.Revision) (most, fewest int, sawBoth bool, violations []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.seen < head {
		b.caughtUp.Wait()
	}
	return b.most, b.fewest, b.sawBoth, b.violation
}

// rollOut plays the scheduler and the agents through a rollout, making one
// pod ready per step, until rollout status would say done.
func rollOut(t *testing.T, c *clustertest.Cluster, key string) int {
	t.Helper()
	for step := range 200 {
		c.Settle()
		d := c.Deployment(key)
		if rolloutDone(d) && d.Status.ObservedGeneration == d.Generation {
			return step
		}
		readyOne(c)
	}
	t.Fatalf("rollout of %s did not complete: %+v", key, c.Deployment(key).Status)
	return 0
}

func TestARollingUpdateShouldNeverExceedReplicasPlusSurgeNorFallBelowReplicasMinusUnavailable(t *testing.T) {
	for _, tc := range []struct {
		replicas           int32
		surge, unavailable string
	}{
		{4, "1", "1"},
		{10, "25%", "25%"},
		{3, "0", "1"},
		{3, "1", "0"},
		{5, "100%", "0"},
	} {
		t.Run(fmt.Sprintf("%d replicas surge %s unavailable %s", tc.replicas, tc.surge, tc.unavailable), func(t *testing.T) {
			c := clustertest.New(t)
			start(t, c)
			apply(t, c, newDeployment("web", tc.replicas, tc.surge, tc.unavailable))
			bringUp(t, c, "default/web")
			surge, unavailable, err := ResolveFenceposts(tc.surge, tc.unavailable, tc.replicas)
			require.NoError(t, err)
			b := watchBounds(t, c, "web", int(tc.replicas+surge), int(tc.replicas-unavailable))
			b.arm()

			setCommand(t, c, "default/web", "v2")
			steps := rollOut(t, c, "default/web")

			most, fewest, sawBoth, violations := b.result(c.Pods.Revision())
			assert.Empty(t, violations)
			assert.True(t, sawBoth, "old and new pods ran side by side")
			assert.Equal(t, int(tc.replicas+surge), most, "the surge was used to its bound")
			assert.GreaterOrEqual(t, fewest, int(tc.replicas-unavailable))
			t.Logf("%d steps; most pods %d, fewest available %d", steps, most, fewest)
			assertVersion(t, c, "web", "v2")
			rss := replicaSets(t, c, "web")
			require.Len(t, rss, 2, "the old ReplicaSet stays, scaled to zero, for a rollback")
			d := c.Deployment("default/web")
			assert.Equal(t, "2", d.Annotations[api.RevisionAnnotation])
			assert.Equal(t, api.ReasonNewReplicaSetAvailable, cond(d, api.DeploymentProgressing).Reason)
		})
	}
}

func TestRecreateShouldRemoveEveryOldPodBeforeTheFirstNewOne(t *testing.T) {
	d := newDeployment("web", 3, "", "")
	d.Spec.Strategy = api.DeploymentStrategy{Type: api.RecreateStrategy}
	c := running(t, d)
	b := watchBounds(t, c, "web", 3, 0)
	b.arm()

	setCommand(t, c, "default/web", "v2")
	rollOut(t, c, "default/web")
	most, fewest, sawBoth, violations := b.result(c.Pods.Revision())
	assert.Empty(t, violations)
	assert.False(t, sawBoth, "never an old and a new pod at once")
	assert.Equal(t, 0, fewest, "Recreate goes through zero")
	assert.Equal(t, 3, most)
}

func TestARollbackShouldReuseTheOldReplicaSetAndGiveItTheNextRevision(t *testing.T) {
	d := newDeployment("web", 2, "", "")
	c := running(t, d)
	v1 := "web-" + ComputeHash(d.Spec.Template, 0)
	setCommand(t, c, "default/web", "v2")
	rollOut(t, c, "default/web")

	setCommand(t, c, "default/web", "v1") // rollout undo copies the old template back
	rollOut(t, c, "default/web")

	rss := replicaSets(t, c, "web")
	require.Len(t, rss, 2, "no third ReplicaSet: v1's is reused")
	assert.Equal(t, int32(2), api.Replicas(rss[v1].Spec.Replicas))
	assert.Equal(t, "3", rss[v1].Annotations[api.RevisionAnnotation])
	assert.Equal(t, "1", rss[v1].Annotations[RevisionHistoryAnnotation])
	assert.Equal(t, "3", c.Deployment("default/web").Annotations[api.RevisionAnnotation])
	assertVersion(t, c, "web", "v1")
}

func TestOldReplicaSetsBeyondTheHistoryLimitShouldBeDeleted(t *testing.T) {
	d := newDeployment("web", 1, "", "")
	one := int32(1)
	d.Spec.RevisionHistoryLimit = &one
	c := running(t, d)
	for _, v := range []string{"v2", "v3", "v4"} {
		setCommand(t, c, "default/web", v)
		rollOut(t, c, "default/web")
	}
	c.Settle()
	rss := replicaSets(t, c, "web")
	var revs []string
	for _, rs := range rss {
		revs = append(revs, rs.Annotations[api.RevisionAnnotation])
	}
	assert.ElementsMatch(t, []string{"3", "4"}, revs, "the new one and one old one")
}

func TestARolloutWithoutProgressShouldBeMarkedProgressDeadlineExceededAtTheDeadline(t *testing.T) {
	d := newDeployment("web", 2, "1", "0")
	deadline := int32(30)
	d.Spec.ProgressDeadlineSeconds = &deadline
	c := running(t, d)

	setCommand(t, c, "default/web", "broken") // its pods never become ready
	c.Settle()
	c.Bind("n1")
	c.Settle()
	assert.Equal(t, object.ConditionTrue, cond(c.Deployment("default/web"), api.DeploymentProgressing).Status,
		"a new pod was made: progress")

	c.Step(29 * time.Second)
	p := cond(c.Deployment("default/web"), api.DeploymentProgressing)
	assert.Equal(t, object.ConditionTrue, p.Status, "29 s: still within the deadline")

	c.Step(time.Second)
	got := c.Deployment("default/web")
	p = cond(got, api.DeploymentProgressing)
	assert.Equal(t, object.ConditionFalse, p.Status)
	assert.Equal(t, api.ReasonProgressDeadlineExceeded, p.Reason)
	assert.Equal(t, int32(2), got.Status.AvailableReplicas, "no automatic rollback: the old pods keep serving")

	setCommand(t, c, "default/web", "v1") // rollout undo
	rollOut(t, c, "default/web")
	assert.Equal(t, api.ReasonNewReplicaSetAvailable, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason)
}

func TestProgressShouldRestartTheDeadline(t *testing.T) {
	d := newDeployment("web", 3, "1", "0")
	deadline := int32(30)
	d.Spec.ProgressDeadlineSeconds = &deadline
	c := running(t, d)
	setCommand(t, c, "default/web", "v2")
	c.Settle()
	for range 3 { // one pod ready every 20 s: never 30 s without progress
		c.Step(20 * time.Second)
		assert.NotEqual(t, api.ReasonProgressDeadlineExceeded, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason,
			"%v after the last progress", 20*time.Second)
		readyOne(c)
		c.Settle()
		assert.NotEqual(t, api.ReasonProgressDeadlineExceeded, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason)
	}
}

func TestAPausedDeploymentShouldScaleButNotRollOut(t *testing.T) {
	d := newDeployment("web", 2, "", "")
	c := running(t, d)
	_, _, err := informer.Update(c.Ctx(), c.Stores.Deployments, "default/web", func(d *api.Deployment) error {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker", "v2"}}}
		three := int32(3)
		d.Spec.Replicas = &three
		return nil
	})
	require.NoError(t, err)
	c.Settle()
	c.BindAndReadyAll("n1")
	c.Settle()
	assert.Len(t, replicaSets(t, c, "web"), 1, "paused: no new ReplicaSet")
	assert.Len(t, c.PodsOf("web"), 3, "but scaled")
	assert.Equal(t, api.ReasonDeploymentPaused, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason)

	_, _, err = informer.Update(c.Ctx(), c.Stores.Deployments, "default/web", func(d *api.Deployment) error {
		d.Spec.Paused = false
		return nil
	})
	require.NoError(t, err)
	rollOut(t, c, "default/web")
	assert.Len(t, replicaSets(t, c, "web"), 2, "resumed: it rolls out")
	assertVersion(t, c, "web", "v2")
}

func TestScalingMidRolloutShouldSpreadTheChangeOverTheReplicaSetsInProportion(t *testing.T) {
	d := newDeployment("web", 10, "3", "2")
	c := running(t, d)
	setCommand(t, c, "default/web", "v2") // its pods stay unready: the rollout stalls at 8 old + 5 new
	c.Settle()
	c.Bind("n1")
	c.Settle()
	sizes := func() (old, new int32) {
		for _, rs := range replicaSets(t, c, "web") {
			if rs.Spec.Template.Spec.Containers[0].Command[2] == "v1" {
				old = api.Replicas(rs.Spec.Replicas)
			} else {
				new = api.Replicas(rs.Spec.Replicas)
			}
		}
		return old, new
	}
	o, n := sizes()
	require.Equal(t, [2]int32{8, 5}, [2]int32{o, n}, "the worked example of rolling.go")

	_, _, err := informer.Update(c.Ctx(), c.Stores.Deployments, "default/web", func(d *api.Deployment) error {
		twenty := int32(20)
		d.Spec.Replicas = &twenty
		return nil
	})
	require.NoError(t, err)
	c.Settle()
	o, n = sizes()
	assert.Equal(t, int32(20+3), o+n, "20 replicas + a surge of 3")
	assert.Greater(t, o, n, "the larger ReplicaSet gets the larger share")
}

func TestADeploymentWithAnEmptySelectorShouldBeRefused(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	d := newDeployment("web", 1, "", "")
	d.Spec.Selector = api.LabelSelector{}
	apply(t, c, d)
	c.Settle()
	assert.Empty(t, replicaSets(t, c, "web"))
	assert.Contains(t, c.EventReasons("default/web"), EventSelectingAll)
}

func TestABadMaxSurgeShouldBeATerminalErrorWithAnEvent(t *testing.T) {
	c := clustertest.New(t)
	start(t, c)
	apply(t, c, newDeployment("web", 1, "lots", "1"))
	c.Settle()
	assert.Empty(t, replicaSets(t, c, "web"))
	assert.Contains(t, c.EventReasons("default/web"), EventInvalidSpec)
}

func TestADeploymentShouldAdoptAnOrphanedReplicaSetOfItsTemplateInsteadOfMakingAnother(t *testing.T) {
	d := newDeployment("web", 2, "", "")
	c := running(t, d)
	pods := c.PodsOf("web")
	rss := replicaSets(t, c, "web")
	require.Len(t, rss, 1)
	// delete --cascade=orphan, done by hand: the ReplicaSet loses its
	// owner, the Deployment goes.
	for name := range rss {
		_, _, err := informer.Update(c.Ctx(), c.Stores.ReplicaSets, "default/"+name, func(rs *api.ReplicaSet) error {
			rs.OwnerReferences = nil
			return nil
		})
		require.NoError(t, err)
	}
	_, err := c.Stores.Deployments.Delete(c.Ctx(), "default/web", 0)
	require.NoError(t, err)
	c.Settle()

	d.UID = "uid-web-again"
	apply(t, c, d)
	c.Settle()
	rss = replicaSets(t, c, "web")
	require.Len(t, rss, 1, "adopted, not duplicated")
	for _, rs := range rss {
		assert.Equal(t, "uid-web-again", rs.OwnerReferences[0].UID)
	}
	assert.Equal(t, pods, c.PodsOf("web"), "the same pods keep running")
	assert.True(t, rolloutDone(c.Deployment("default/web")))
}
