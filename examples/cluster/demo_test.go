package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemoShouldObserveEveryStepAndLeaveNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	testDemo(t, "mem")
}

// The controllers, real agent processes and the demo's user on etcd: the
// end-to-end test of the whole cluster on etcd.
func TestDemoShouldObserveEveryStepAndLeaveNoProcessOnEtcd(t *testing.T) {
	testDemo(t, "etcd://"+freshEtcd(t))
}

// testDemo runs the demo on store and checks what it printed and
// reported.
func testDemo(t *testing.T, store string) {
	t.Setenv(asMainEnv, "1") // the agents and their workers are this test binary
	report := t.TempDir() + "/report.json"
	var out strings.Builder
	err := runDemo(t.Context(), store, "fast", report, &out)
	require.NoError(t, err, out.String())
	for _, want := range []string{"nodes n1, n2, n3 Ready", "restarted in place", "back-off grows", "n2's containers died with it",
		"n2 renews its lease again", "no node has more than 2", "replacements Running", "rolled out to a new ReplicaSet",
		"Progressing=False ProgressDeadlineExceeded", "rolled back", "Progressing=True NewReplicaSetAvailable", "n3 rejoined",
		"the two taints", "slow-start batches", "gone when the delete returned", "with no ownerReferences", "cleaned up",
		"then the Deployment", "every step observed"} {
		assert.Contains(t, out.String(), want)
	}
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	var rep demoReport
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.True(t, rep.OK)
	assert.Len(t, rep.Steps, 16)
	require.NotNil(t, rep.Deploy)
	assert.Positive(t, rep.Deploy.AllRunning)
	require.NotNil(t, rep.NodeDeath)
	assert.Positive(t, rep.NodeDeath.Running)
	assert.NotContains(t, rep.NodeDeath.Replacements, rep.NodeDeath.Node)
	require.NotNil(t, rep.Rollout)
	assert.LessOrEqual(t, rep.Rollout.Surge, rep.Rollout.MaxSurge)
	assert.LessOrEqual(t, rep.Rollout.Unavailable, rep.Rollout.MaxUnavailable)
	require.NotNil(t, rep.Broken)
	assert.Positive(t, rep.Broken.NewPods)
	assert.Zero(t, rep.Broken.NewAvailable, "a template that never becomes available")
	assert.GreaterOrEqual(t, rep.Broken.DeadlineExceeded, time.Duration(rep.Broken.ProgressDeadlineSeconds)*time.Second)
	assert.LessOrEqual(t, rep.Broken.Bounds.Surge, rep.Broken.Bounds.MaxSurge)
	assert.LessOrEqual(t, rep.Broken.Bounds.Unavailable, rep.Broken.Bounds.MaxUnavailable)
	require.NotNil(t, rep.Undo)
	assert.Greater(t, rep.Undo.Revision, rep.Undo.RevisionBefore)
	require.NotNil(t, rep.Herd)
	require.Len(t, rep.Herd.Nodes, 2)
	for _, n := range rep.Herd.Nodes {
		assert.Positive(t, n.Pods)
		assert.GreaterOrEqual(t, n.FirstEvicted, n.Tainted, "%s's pods tolerate the taint for a while", n.Name)
		assert.NotContains(t, rep.Herd.Replacements, n.Name)
	}
	assert.GreaterOrEqual(t, rep.Herd.TaintGap, 900*time.Millisecond, "one node a second")
	assert.NotEmpty(t, rep.Herd.Waves)
	require.NotNil(t, rep.Background)
	assert.LessOrEqual(t, rep.Background.DeploymentGone, rep.Background.PodsGone)
	assert.Equal(t, rep.Herd.Pods, rep.Background.Pods)
	require.NotNil(t, rep.Orphan)
	assert.Equal(t, rep.Orphan.Pods, rep.Orphan.OrphansAlive, "the orphans kept running")
	require.NotNil(t, rep.Delete)
	assert.GreaterOrEqual(t, rep.Delete.DeploymentGone, rep.Delete.ReplicaSetsGone)
	assert.GreaterOrEqual(t, rep.Delete.ReplicaSetsGone, rep.Delete.PodsGone)
	assert.Empty(t, rep.Leftovers)
	assert.Positive(t, rep.KillToRestart)
}
