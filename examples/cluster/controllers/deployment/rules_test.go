package deployment

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/informer"
)

// Recreate waits for the old pods to end, not only for their ReplicaSets
// to count none: a terminating pod (its deletion asked, a finalizer still
// on it) may still run its process (recreate.go oldPodsRunning).
func TestRecreateShouldWaitForOldPodsThatAreStillTerminating(t *testing.T) {
	d := newDeployment("web", 2, "", "")
	d.Spec.Strategy = api.DeploymentStrategy{Type: api.RecreateStrategy}
	c := running(t, d)
	old := c.PodsOf("web")
	require.Len(t, old, 2)
	for _, e := range old {
		c.UpdatePod(e.Key, func(p *api.Pod) { p.AddFinalizer("example.com/drain") })
	}

	setCommand(t, c, "default/web", "v2")
	for range 5 {
		c.Settle()
		c.BindAndReadyAll("n1")
	}
	pods := c.PodsOf("web")
	require.Equal(t, 2, len(pods), "no new pod while the old ones terminate")
	for _, e := range pods {
		assert.True(t, e.Value.Deleting(), "pod %s is terminating", e.Key)
		assert.Equal(t, "v1", e.Value.Spec.Containers[0].Command[2])
	}

	for _, e := range old { // their processes end, and the pods go
		_, err := c.Pods.Delete(c.Ctx(), e.Key, 0)
		require.NoError(t, err)
	}
	rollOut(t, c, "default/web")
	assertVersion(t, c, "web", "v2")
	assert.Len(t, c.PodsOf("web"), 2)
}

// A paused Deployment is not progressing, so it cannot miss its deadline
// however long it stays paused; resumed mid-rollout, its deadline counts
// from the resume, not from its last progress before the pause (sync.go
// checkPausedConditions, progress.go).
func TestAPausedDeploymentShouldNotMissItsProgressDeadlineAndCountItFromItsResume(t *testing.T) {
	d := newDeployment("web", 2, "1", "0")
	deadline := int32(30)
	d.Spec.ProgressDeadlineSeconds = &deadline
	c := running(t, d)
	setCommand(t, c, "default/web", "v2") // its pods run, never ready
	c.Settle()
	c.Bind("n1")
	c.Settle()
	require.Len(t, replicaSets(t, c, "web"), 2, "the rollout has begun")
	setPaused(t, c, true)
	c.Settle()
	c.Step(time.Minute)
	assert.Equal(t, api.ReasonDeploymentPaused, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason,
		"twice the deadline later")

	setPaused(t, c, false)
	c.Settle()
	c.Step(29 * time.Second)
	assert.NotEqual(t, api.ReasonProgressDeadlineExceeded, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason,
		"29 s after the resume")
	c.Step(time.Second)
	assert.Equal(t, api.ReasonProgressDeadlineExceeded, cond(c.Deployment("default/web"), api.DeploymentProgressing).Reason,
		"30 s after the resume")
}

func setPaused(t *testing.T, c *clustertest.Cluster, paused bool) {
	t.Helper()
	_, _, err := informer.Update(c.Ctx(), c.Stores.Deployments, "default/web", func(d *api.Deployment) error {
		d.Spec.Paused = paused
		return nil
	})
	require.NoError(t, err)
}

// The history limit deletes only old ReplicaSets that are scaled down and
// have no pods left; mid-rollout the old one still serves and stays
// (sync.go cleanupDeployment).
func TestAHistoryLimitOfZeroShouldDeleteTheOldReplicaSetOnlyOnceTheRolloutIsComplete(t *testing.T) {
	d := newDeployment("web", 2, "1", "0")
	zero := int32(0)
	d.Spec.RevisionHistoryLimit = &zero
	c := running(t, d)
	v1 := "web-" + ComputeHash(d.Spec.Template, 0)

	setCommand(t, c, "default/web", "v2")
	c.Settle()
	readyOne(c)
	c.Settle()
	rss := replicaSets(t, c, "web")
	require.Equal(t, 2, len(rss), "mid-rollout")
	assert.Positive(t, api.Replicas(rss[v1].Spec.Replicas), "the old ReplicaSet still runs pods, and stays")

	rollOut(t, c, "default/web")
	c.Settle()
	rss = replicaSets(t, c, "web")
	assert.Len(t, rss, 1, "complete: no history kept")
	assert.NotContains(t, rss, v1)
}
