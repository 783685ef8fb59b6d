package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
)

// startUp runs the control plane in this process on a free port, until
// the test ends, and returns its URL.
func startUp(t *testing.T, store, token string) string {
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- up(ctx, upConfig{store: store, timings: "fast", listen: "127.0.0.1:0", token: token,
			managerAddr: "off", logLevel: "none", onListen: func(u string) { urls <- u }}, io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("up: %v", err)
	}
	return ""
}

// startAgent starts `cluster agent` for node as a separate process of
// this test binary, stopped (SIGTERM) when the test ends unless killed.
func startAgent(t *testing.T, url, token, node, logDir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "agent", "--node", node, "--api", url, "--token", token, "--log-level", "none")
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "CLUSTER_LOG_DIR="+logDir)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	return cmd
}

func TestAgentsShouldRunPodsAsProcessesRestartThemAndTakeThemDownWhenKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	testAgents(t, "mem")
}

func TestAgentsShouldRunPodsOnEtcd(t *testing.T) {
	testAgents(t, "etcd://"+freshEtcd(t))
}

func testAgents(t *testing.T, store string) {
	t.Setenv(asMainEnv, "1") // the agents' workers are this test binary too
	const token = "secret"
	url := startUp(t, store, token)
	logDir := t.TempDir()
	n1 := startAgent(t, url, token, "n1", logDir)
	startAgent(t, url, token, "n2", logDir)
	st, err := apiserver.NewStores(url, token, httpstore.ClientOptions{})
	require.NoError(t, err)
	ctx := t.Context()

	require.Eventually(t, func() bool {
		nodes, _, err := st.Nodes.List(ctx)
		leases, _, lerr := st.Leases.List(ctx)
		return err == nil && lerr == nil && len(nodes) == 2 && len(leases) == 2
	}, 20*time.Second, 20*time.Millisecond, "both agents register their nodes and leases")
	lease, _, ok, err := st.Leases.Get(ctx, api.Key(api.NodeLeaseNamespace, "n1"))
	require.NoError(t, err)
	require.True(t, ok, "n1 holds its lease")
	assert.Equal(t, "n1", lease.Spec.HolderIdentity)

	pod := api.Pod{Metadata: api.Metadata{Name: "solo", Namespace: "default"}, Spec: api.PodSpec{NodeName: "n1",
		Containers: []api.Container{{Name: "w", Command: []string{"cluster", "worker"},
			ReadinessProbe: &api.Probe{Exec: &api.ExecAction{Command: []string{"true"}}, PeriodSeconds: 1}}}}}
	_, err = st.Pods.Create(ctx, "default/solo", pod)
	require.NoError(t, err)

	running := func(restarts int32) (pid int) {
		require.Eventually(t, func() bool {
			p, _, ok, err := st.Pods.Get(ctx, "default/solo")
			if err != nil || !ok || p.Status.Phase != api.PodRunning || len(p.Status.ContainerStatuses) != 1 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			pid = cs.PID
			return cs.RestartCount == restarts && cs.State.Running != nil && pid != 0 && alive(pid) && p.IsReady()
		}, 20*time.Second, 20*time.Millisecond, "the pod runs with %d restarts, ready by its probe", restarts)
		return pid
	}
	first := running(0)

	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	second := running(1)
	assert.NotEqual(t, first, second, "a new process")
	p, _, _, err := st.Pods.Get(ctx, "default/solo")
	require.NoError(t, err)
	last := p.Status.ContainerStatuses[0].LastState.Terminated
	require.NotNil(t, last, "the killed process's end is its last state")
	assert.Equal(t, int32(137), last.ExitCode, "128 + SIGKILL")

	require.NoError(t, n1.Process.Kill())
	_ = n1.Wait()
	require.Eventually(t, func() bool { return !alive(second) }, 10*time.Second, 10*time.Millisecond,
		"the container dies with its agent")
	before, _, _, err := st.Leases.Get(ctx, api.Key(api.NodeLeaseNamespace, "n1"))
	require.NoError(t, err)
	for range 2 { // two renewals of n2: n1, alive, would have renewed by then
		n2, _, _, err := st.Leases.Get(ctx, api.Key(api.NodeLeaseNamespace, "n2"))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			l, _, _, err := st.Leases.Get(ctx, api.Key(api.NodeLeaseNamespace, "n2"))
			return err == nil && l.Spec.RenewTime.After(n2.Spec.RenewTime)
		}, 10*time.Second, 10*time.Millisecond, "n2 renews its lease")
	}
	after, _, _, err := st.Leases.Get(ctx, api.Key(api.NodeLeaseNamespace, "n1"))
	require.NoError(t, err)
	assert.Equal(t, before.Spec.RenewTime, after.Spec.RenewTime, "n1's lease is no longer renewed")

	other := pod
	other.Name, other.Spec.NodeName = "other", "n2"
	other.Spec.Containers = []api.Container{{Name: "w", Command: []string{"cluster", "worker"},
		ReadinessProbe: &api.Probe{Exec: &api.ExecAction{Command: []string{"false"}}, PeriodSeconds: 1}}}
	_, err = st.Pods.Create(ctx, "default/other", other)
	require.NoError(t, err)
	var pid int
	require.Eventually(t, func() bool {
		p, _, ok, err := st.Pods.Get(ctx, "default/other")
		if err != nil || !ok || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		pid = p.Status.ContainerStatuses[0].PID
		return pid != 0 && alive(pid) && p.Status.Phase == api.PodRunning
	}, 20*time.Second, 20*time.Millisecond, "n2 runs its pod")
	p, _, _, err = st.Pods.Get(ctx, "default/other")
	require.NoError(t, err)
	assert.False(t, p.IsReady(), "a failing readiness probe keeps a running pod unready")
	_, _, err = informer.Update(ctx, st.Pods, "default/other", func(p *api.Pod) error { p.Spec.NodeName = "elsewhere"; return nil })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !alive(pid) }, 20*time.Second, 10*time.Millisecond,
		"the process of a pod bound elsewhere is stopped")

	// A deleted pod's process is stopped too: the demo's last step.
}
