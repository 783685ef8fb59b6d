package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

func TestCountedStoresShouldCountCommittedWritesByVerbConflictsAndTheEventsEachWatchGets(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	counts := storeCounts{}
	st := counts.wrap(must.Do(api.NewMemoryStores()))

	seen := make(chan informer.Event[string, api.Lease], 16)
	watched := make(chan error, 2)
	for range 2 {
		go func() {
			watched <- st.Leases.Watch(ctx, 0, func(ev informer.Event[string, api.Lease]) error {
				seen <- ev
				return nil
			})
		}()
	}
	rev := must.Do(st.Leases.Create(ctx, "kube-node-lease/n1", api.Lease{}))
	_, err := st.Leases.Create(ctx, "kube-node-lease/n1", api.Lease{})
	require.ErrorIs(t, err, informer.ErrConflict, "a second create of a key")
	rev = must.Do(st.Leases.Update(ctx, "kube-node-lease/n1", api.Lease{}, rev))
	_, err = st.Leases.Update(ctx, "kube-node-lease/n1", api.Lease{}, rev-1)
	require.ErrorIs(t, err, informer.ErrConflict)
	must.Do(st.Leases.Delete(ctx, "kube-node-lease/n1", 0))
	gone := must.Do(st.Leases.Delete(ctx, "kube-node-lease/n1", 0))
	require.Zero(t, gone, "deleting a key that is gone writes nothing")
	for range 6 { // three writes, two watches
		<-seen
	}
	assert.Equal(t, int64(2), counts["leases"].watches.Load())
	cancel()
	<-watched
	<-watched

	got := counts["leases"].snapshot()
	assert.Equal(t, KindCounts{Creates: 1, Updates: 1, Deletes: 1, Conflicts: 2, WatchEvents: 6, Watches: 0}, got)
	assert.Equal(t, int64(3), got.Writes())
	assert.Zero(t, counts["pods"].snapshot().Writes(), "the other kinds count apart")
}

func TestTheLoadManifestShouldSpreadThePodsOverTheDeploymentsAndPassValidation(t *testing.T) {
	docs, err := api.Decode([]byte(loadManifest(1000, 3)))
	require.NoError(t, err)
	require.Len(t, docs, 3)
	var replicas []int32
	for _, d := range docs {
		dep, ok := d.Object.(*api.Deployment)
		require.True(t, ok, "a Deployment")
		api.Default(dep, -1)
		require.NoError(t, api.Validate(dep))
		replicas = append(replicas, api.Replicas(dep.Spec.Replicas))
	}
	assert.Equal(t, []int32{334, 333, 333}, replicas)
}

func TestMeasureShouldReportTheControlPlaneAndTheWritesOfTheApplyUntilEveryPodRuns(t *testing.T) {
	t.Setenv(asMainEnv, "1") // the control plane and the agents are this test binary
	report := filepath.Join(t.TempDir(), "measure.json")
	var out, errOut bytes.Buffer
	code := realMain([]string{"measure", "--nodes", "2", "--pods", "4", "--deployments", "2", "--timeout", "1m", "--report", report}, &out, &errOut)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())

	var rep MeasureReport
	require.NoError(t, json.Unmarshal(must.Do(os.ReadFile(report)), &rep))
	assert.True(t, rep.FakeContainers, "fake containers by default")
	assert.Positive(t, rep.AllRunning)
	assert.LessOrEqual(t, rep.AllBound, rep.AllRunning)
	assert.Positive(t, rep.Loaded.RSS)
	assert.Positive(t, rep.Loaded.LiveHeap)
	assert.Positive(t, rep.Loaded.Goroutines)
	assert.Greater(t, rep.Loaded.CPU, rep.Idle.CPU)
	pods := rep.Kinds["pods"]
	assert.Equal(t, int64(4), pods.Creates)
	assert.Equal(t, 4, rep.PodBinds)
	assert.GreaterOrEqual(t, pods.Updates, int64(8), "a bind and a status write a pod at least")
	assert.Equal(t, int64(4), pods.Watches, "the controllers' informer, two agents and the command's own watch")
	assert.Equal(t, 2*pods.Writes()+pods.Updates, pods.WatchEvents,
		"the controllers' informer and the command's watch get every pod write; an agent, the binds and status writes of its node's pods only")
	assert.Equal(t, int64(2), rep.Kinds["deployments"].Creates)
	assert.Equal(t, int64(2), rep.Kinds["replicasets"].Creates)
	assert.Equal(t, 4, rep.EventRecords["default-scheduler Scheduled"])
	assert.Contains(t, out.String(), "control plane at 2 nodes / 4 pods")
}
