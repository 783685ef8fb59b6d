package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAgentWithFakeContainersShouldRunAndStopPodsWithoutProcesses(t *testing.T) {
	st := must.Do(api.NewMemoryStores())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Node: "n1", Stores: st, FakeContainers: true, LogDir: t.TempDir()}) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, func() bool {
		n, _, ok, err := st.Nodes.Get(t.Context(), "n1")
		return err == nil && ok && object.IsTrue(n.Status.Conditions, api.NodeReady) &&
			n.Status.Capacity[api.ResourceCPU] == "4" && n.Status.Capacity[api.ResourcePods] == "110"
	}, 10*time.Second, 5*time.Millisecond, "the node registers with its capacity, Ready")

	pod := api.Pod{Metadata: api.Metadata{Name: "p", Namespace: "default", UID: "u1"}, Spec: api.PodSpec{NodeName: "n1",
		RestartPolicy: api.RestartAlways, Containers: []api.Container{{Name: "c", Command: []string{"no-such-program"}}}}}
	_, err := st.Pods.Create(t.Context(), "default/p", pod)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, _, _, err := st.Pods.Get(t.Context(), "default/p")
		return err == nil && p.Status.Phase == api.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].PID > 1<<22 && p.IsReady()
	}, 10*time.Second, 5*time.Millisecond, "a fake container runs any command, with a pid no process has")

	_, err = st.Pods.Delete(t.Context(), "default/p", 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		entries, _, err := st.Events.List(t.Context())
		if err != nil {
			return false
		}
		for _, e := range entries {
			if e.Value.Key == "default/p" && e.Value.Reason == "Killing" {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the agent stops a deleted pod's containers, and says so")
}
