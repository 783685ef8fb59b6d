package ctl

import (
	"fmt"
	"strconv"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
)

// nodeLostReason is the pod status reason of a pod whose node stopped
// answering (Kubernetes' NodeUnreachablePodReason).
const nodeLostReason = "NodeLost"

// podColumns are the READY, STATUS and RESTARTS cells of a pod.
type podColumns struct{ ready, status, restarts string }

// printPod computes a pod's READY, STATUS and RESTARTS as kubectl get does
// (printPod in k8s@v1.37.2:pkg/printers/internalversion/printers.go):
//   - READY counts the containers whose status says ready and running: a
//     pod on a lost node, whose Ready condition the node lifecycle set
//     False but whose containers nobody updates, stays 1/1 Running in
//     kubectl too, until it is evicted (the Deployment's READY, counted
//     from the condition, drops at once);
//   - STATUS is the phase (or the status reason), overridden by each
//     container's waiting or terminated reason, the first container's
//     winning (ExitCode:N or Signal:N for a termination without one); a
//     Completed container beside a running one gives Running if the pod is
//     Ready, else NotReady, and beside a failed one the failure; a pod
//     being deleted is Unknown if its node was lost, else Terminating
//     unless it already ended;
//   - RESTARTS adds "(AGE ago)" of the last termination.
func printPod(p *api.Pod) podColumns {
	reason := p.Status.Phase
	if reason == "" {
		reason = api.PodPending // what the API server sets on create
	}
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	ready, restarts := 0, 0
	var lastRestart time.Time
	hasRunning, errorReason := false, ""
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := p.Status.ContainerStatuses[i]
		restarts += int(c.RestartCount)
		if t := c.LastState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt
		}
		switch t := c.State.Terminated; {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			reason = c.State.Waiting.Reason
		case t != nil:
			switch {
			case t.Reason != "":
				reason = t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("ExitCode:%d", t.ExitCode)
			}
			if t.ExitCode != 0 {
				errorReason = reason
			}
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			ready++
		}
	}
	if reason == "Completed" {
		switch {
		case hasRunning && p.IsReady():
			reason = api.PodRunning
		case errorReason != "":
			reason = errorReason
		case hasRunning:
			reason = "NotReady"
		}
	}
	if p.Deleting() {
		if p.Status.Reason == nodeLostReason {
			reason = "Unknown"
		} else if p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
			reason = "Terminating"
		}
	}
	rs := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		rs = fmt.Sprintf("%d (%s ago)", restarts, Age(lastRestart))
	}
	return podColumns{ready: fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)), status: reason, restarts: rs}
}

// PodStatus is kubectl get's STATUS of a pod (see printPod).
func PodStatus(p *api.Pod) string { return printPod(p).status }
