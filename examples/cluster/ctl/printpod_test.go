package ctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// podWith returns a running pod of one container per state, created ten
// minutes ago, Ready as ready says.
func podWith(ready object.ConditionStatus, states ...api.ContainerStatus) api.Pod {
	p := api.Pod{}
	p.Name, p.Namespace = "web-1", "default"
	p.CreationTimestamp = time.Now().Add(-10 * time.Minute)
	p.Spec.NodeName = "n1"
	p.Status.Phase = api.PodRunning
	p.Status.Conditions = []object.Condition{{Type: api.PodReady, Status: ready}}
	for i, s := range states {
		s.Name = string(rune('a' + i))
		p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: s.Name})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, s)
	}
	return p
}

func running(ready bool) api.ContainerStatus {
	return api.ContainerStatus{Ready: ready, State: api.ContainerState{Running: &api.ContainerStateRunning{StartedAt: time.Now()}}}
}

func waiting(reason string) api.ContainerStatus {
	return api.ContainerStatus{State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: reason}}}
}

func terminated(code, signal int32, reason string) api.ContainerStatus {
	return api.ContainerStatus{State: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: code, Signal: signal, Reason: reason}}}
}

// The rules are printPod's, k8s@v1.37.2:pkg/printers/internalversion/printers.go.
func TestGetPodsShouldPrintTheReadyStatusAndRestartsColumnsAsKubectlDoes(t *testing.T) {
	lostNode := podWith(object.ConditionFalse, running(true))

	readyButWaiting := waiting(api.ReasonCrashLoopBackOff)
	readyButWaiting.Ready = true // a status written before the container died

	restarted := running(true)
	restarted.RestartCount = 2
	restarted.LastState.Terminated = &api.ContainerStateTerminated{ExitCode: 1, FinishedAt: time.Now().Add(-5 * time.Minute)}

	deletingLost := podWith(object.ConditionFalse, running(true))
	deletingLost.DeletionRequested = time.Now()
	deletingLost.Status.Reason = "NodeLost"

	deletingDone := podWith(object.ConditionFalse, terminated(0, 0, "Completed"))
	deletingDone.Status.Phase = api.PodSucceeded
	deletingDone.DeletionRequested = time.Now()

	deletingRunning := podWith(object.ConditionTrue, running(true))
	deletingRunning.DeletionRequested = time.Now()

	for _, tc := range []struct {
		name                    string
		pod                     api.Pod
		ready, status, restarts string
	}{
		{"on a lost node, whose Ready condition the node lifecycle set False: the containers still say ready and running",
			lostNode, "1/1", "Running", "0"},
		{"a container starting", podWith(object.ConditionFalse, waiting("ContainerCreating")), "0/1", "ContainerCreating", "0"},
		{"a container ready but waiting", podWith(object.ConditionFalse, readyButWaiting), "0/1", "CrashLoopBackOff", "0"},
		{"a container that exited without a reason", podWith(object.ConditionFalse, terminated(3, 0, "")), "0/1", "ExitCode:3", "0"},
		{"a container killed by a signal", podWith(object.ConditionFalse, terminated(137, 9, "")), "0/1", "Signal:9", "0"},
		{"one container completed, one running, the pod Ready", podWith(object.ConditionTrue, terminated(0, 0, "Completed"), running(true)), "1/2", "Running", "0"},
		{"one container completed, one running, the pod not Ready", podWith(object.ConditionFalse, terminated(0, 0, "Completed"), running(true)), "1/2", "NotReady", "0"},
		{"one container completed, one failed", podWith(object.ConditionFalse, terminated(0, 0, "Completed"), terminated(2, 0, "Error")), "0/2", "Error", "0"},
		{"the first container's reason wins", podWith(object.ConditionFalse, waiting("CrashLoopBackOff"), terminated(1, 0, "Error")), "0/2", "CrashLoopBackOff", "0"},
		{"restarted", podWith(object.ConditionTrue, restarted), "1/1", "Running", "2 (5m ago)"},
		{"deleted on a lost node", deletingLost, "1/1", "Unknown", "0"},
		{"deleted after it completed", deletingDone, "0/1", "Completed", "0"},
		{"deleted while running", deletingRunning, "1/1", "Terminating", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := lookupKind("pods")
			require.NoError(t, err)
			r := row(k, item{v: &tc.pod}, false, false, false)
			require.Len(t, r, 5)
			assert.Equal(t, []string{tc.ready, tc.status, tc.restarts}, r[1:4])
		})
	}
}
