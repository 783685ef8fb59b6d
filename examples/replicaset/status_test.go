package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/object"
)

func TestCrashBackOff(t *testing.T) {
	kubelet := crashBackOff{Base: 10 * time.Second, Cap: 5 * time.Minute}
	crashes := 0
	var delays []time.Duration
	for range 9 {
		var d time.Duration
		crashes, d = kubelet.AfterExit(crashes, time.Second)
		delays = append(delays, d)
	}
	s := time.Second
	assert.Equal(t, []time.Duration{0, 10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s}, delays,
		"the first restart is at once, then 10s doubling up to 5m")
	assert.Equal(t, 9, crashes)

	n, d := kubelet.AfterExit(crashes, 10*time.Minute)
	assert.Equal(t, 1, n, "a process that ran for 2×cap starts a fresh count")
	assert.Zero(t, d)

	demo := crashBackOff{Base: 200 * time.Millisecond, Cap: 5 * time.Second}
	_, d = demo.AfterExit(5, 0)
	assert.Equal(t, 3200*time.Millisecond, d)
	_, d = demo.AfterExit(6, 0)
	assert.Equal(t, 5*time.Second, d)
}

func pod(name string, phase, reason string, restarts int, created time.Time, command ...string) namedPod {
	if len(command) == 0 {
		command = []string{"replicaset", "worker"}
	}
	return namedPod{name, Pod{
		Spec:   PodSpec{Owner: "web", Node: "local", Command: command, CreatedAt: created},
		Status: PodStatus{Phase: phase, Reason: reason, RestartCount: restarts},
	}}
}

func split(pods []namedPod) (names []string, owned []Pod) {
	for _, p := range pods {
		names, owned = append(names, p.name), append(owned, p.Pod)
	}
	return names, owned
}

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := ReplicaSetSpec{Replicas: 2, Command: []string{"replicaset", "worker"}}
	tests := []struct {
		name       string
		replicas   int
		pods       []namedPod
		wantDelete []string
		wantCreate int
	}{
		{"create from nothing", 2, nil, nil, 2},
		{"create the missing one", 2, []namedPod{pod("a", PhaseRunning, "", 0, t0)}, nil, 1},
		{"in step", 2, []namedPod{pod("a", PhaseRunning, "", 0, t0), pod("b", PhaseRunning, "", 0, t0)}, nil, 0},
		{"not ready goes first", 1, []namedPod{
			pod("ready", PhaseRunning, "", 0, t0),
			pod("waiting", PhaseWaiting, ReasonCrashLoopBackOff, 3, t0),
		}, []string{"waiting"}, 0},
		{"then more restarts, then newest", 2, []namedPod{
			pod("old", PhaseRunning, "", 0, t0),
			pod("new", PhaseRunning, "", 0, t0.Add(time.Minute)),
			pod("crashy", PhaseRunning, "", 5, t0),
			pod("newer", PhaseRunning, "", 0, t0.Add(2*time.Minute)),
		}, []string{"crashy", "newer"}, 0},
		{"old command replaced", 2, []namedPod{
			pod("a", PhaseRunning, "", 0, t0),
			pod("b", PhaseRunning, "", 0, t0, "sleep", "100"),
		}, []string{"b"}, 1},
		{"scale to zero", 0, []namedPod{pod("a", PhaseRunning, "", 0, t0)}, []string{"a"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec
			s.Replicas = tt.replicas
			names, owned := split(tt.pods)
			del, create := plan(s, names, owned)
			assert.Equal(t, tt.wantDelete, del)
			assert.Equal(t, tt.wantCreate, create)
		})
	}
}

func TestComputeStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := ReplicaSetSpec{Replicas: 2, Command: []string{"replicaset", "worker"}}
	running := pod("web-a", PhaseRunning, "", 0, t0)
	crashing := pod("web-b", PhaseWaiting, ReasonCrashLoopBackOff, 3, t0)
	crashing.Status.Message = "back-off 800ms restarting failed process (exit status 3)"
	invalid := pod("web-c", PhaseFailed, ReasonInvalidCommand, 0, t0)
	invalid.Status.Message = `exec: "x": executable file not found in $PATH`

	tests := []struct {
		name                string
		kept                []namedPod
		created, deleted    int
		ready, failure      string // reasons
		readyN, replicas    int
		readyMsg, failedMsg string
	}{
		{"all ready", []namedPod{running, running}, 0, 0, ReasonAllReady, ReasonNoFailures, 2, 2, "2/2 replicas ready", ""},
		{"scaling", []namedPod{running}, 1, 0, ReasonScaling, ReasonNoFailures, 1, 2, "1/2 replicas ready; created 1 pods, deleted 0", ""},
		{"crash loop", []namedPod{running, crashing}, 0, 0, ReasonPodsNotReady, ReasonCrashLoopBackOff, 1, 2,
			"1/2 replicas ready; waiting for web-b (Waiting, CrashLoopBackOff: back-off 800ms restarting failed process (exit status 3))",
			"web-b (Waiting, CrashLoopBackOff: back-off 800ms restarting failed process (exit status 3))"},
		{"invalid command wins", []namedPod{crashing, invalid}, 0, 0, ReasonPodsNotReady, ReasonInvalidCommand, 0, 2, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(spec, 4, nil, tt.kept, tt.created, tt.deleted, t0)
			assert.Equal(t, tt.readyN, st.ReadyReplicas)
			assert.Equal(t, tt.replicas, st.Replicas)
			ready, ok := object.FindCondition(st.Conditions, CondReady)
			require.True(t, ok)
			assert.Equal(t, tt.ready, ready.Reason)
			assert.Equal(t, tt.ready == ReasonAllReady, ready.Status == object.ConditionTrue)
			assert.EqualValues(t, 4, st.ObservedGeneration)
			assert.EqualValues(t, 4, ready.ObservedGeneration, "conditions say which generation they describe")
			failure, ok := object.FindCondition(st.Conditions, CondReplicaFailure)
			require.True(t, ok)
			assert.Equal(t, tt.failure, failure.Reason)
			assert.Equal(t, tt.failure != ReasonNoFailures, failure.Status == object.ConditionTrue)
			if tt.readyMsg != "" {
				assert.Equal(t, tt.readyMsg, ready.Message)
			}
			if tt.failedMsg != "" {
				assert.Equal(t, tt.failedMsg, failure.Message)
			}
		})
	}
}
