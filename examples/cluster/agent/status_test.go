package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/examples/cluster/api"
	osproc "github.com/converge-go/converge/examples/internal/proc"
)

func running() api.ContainerStatus {
	return api.ContainerStatus{State: api.ContainerState{Running: &api.ContainerStateRunning{}}}
}
func terminated(code int32) api.ContainerStatus {
	return api.ContainerStatus{State: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: code}}}
}
func backingOff() api.ContainerStatus {
	return api.ContainerStatus{State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: api.ReasonCrashLoopBackOff}},
		LastState: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: 1}}}
}
func creating() api.ContainerStatus {
	return api.ContainerStatus{State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

func TestPodPhaseShouldFollowKubeletsRules(t *testing.T) {
	for name, tc := range map[string]struct {
		statuses []api.ContainerStatus
		want     string
	}{
		"not started yet":            {[]api.ContainerStatus{running(), creating()}, api.PodPending},
		"running":                    {[]api.ContainerStatus{running(), running()}, api.PodRunning},
		"crash looping still runs":   {[]api.ContainerStatus{backingOff()}, api.PodRunning},
		"one done, one running":      {[]api.ContainerStatus{terminated(0), running()}, api.PodRunning},
		"all done, one failed":       {[]api.ContainerStatus{terminated(0), terminated(2)}, api.PodFailed},
		"all done, all succeeded":    {[]api.ContainerStatus{terminated(0), terminated(0)}, api.PodSucceeded},
		"restarting beside finished": {[]api.ContainerStatus{terminated(0), backingOff()}, api.PodRunning},
	} {
		assert.Equal(t, tc.want, podPhase(tc.statuses), name)
	}
}

func TestAfterExitShouldRestartPerRestartPolicyWithTheBackOff(t *testing.T) {
	k := &kubelet{backoff: osproc.CrashBackOff{Base: 10 * time.Second, Cap: 5 * time.Minute}}
	t0 := time.Unix(1000, 0)
	exit := func(policy string, code int32, cs *ctrState) {
		cs.lastTerm = &api.ContainerStateTerminated{ExitCode: code, FinishedAt: t0}
		k.afterExit(&api.Pod{Spec: api.PodSpec{RestartPolicy: policy}}, cs, time.Second, code)
	}
	never := &ctrState{}
	exit(api.RestartNever, 1, never)
	assert.True(t, never.finished, "Never: a failed container stays down")
	onFailure := &ctrState{}
	exit(api.RestartOnFailure, 0, onFailure)
	assert.True(t, onFailure.finished, "OnFailure: a container that succeeded stays down")
	onFailure = &ctrState{}
	exit(api.RestartOnFailure, 3, onFailure)
	assert.False(t, onFailure.finished, "OnFailure: a failed container restarts")

	always := &ctrState{}
	var delays []time.Duration
	for range 4 {
		exit(api.RestartAlways, 0, always)
		assert.False(t, always.finished, "Always: even a success restarts")
		delays = append(delays, always.nextStart.Sub(t0))
	}
	assert.Equal(t, []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second}, delays,
		"immediately, then 10 s doubling")
}

func TestContainerStatusShouldSayWhyAContainerDoesNotRun(t *testing.T) {
	pod := &api.Pod{Metadata: api.Metadata{Name: "web-x", Namespace: "default", UID: "u1"}}
	last := &api.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}
	cs := &ctrState{starts: 3, lastTerm: last, delay: 20 * time.Second}
	st := containerStatus(pod, "web", cs)
	assert.Equal(t, int32(2), st.RestartCount)
	assert.Equal(t, api.ReasonCrashLoopBackOff, st.State.Waiting.Reason)
	assert.Equal(t, "back-off 20s restarting failed container=web pod=web-x_default(u1)", st.State.Waiting.Message)
	assert.Equal(t, last, st.LastState.Terminated)
	assert.False(t, st.Ready)

	cs.finished = true
	st = containerStatus(pod, "web", cs)
	assert.Equal(t, int32(3), st.State.Terminated.ExitCode, "a finished container is terminated")
	assert.Nil(t, st.LastState.Terminated)
}
