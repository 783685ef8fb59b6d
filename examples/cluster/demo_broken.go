package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/deployment"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// The broken version of the demo's Deployment: its container crashes
// before its readiness probe first runs, so it is never Ready, and a pod
// must be Ready for brokenMinReady to count as available. A crash loop
// without a probe would be Ready for a moment at every restart: the
// Deployment's readyReplicas would rise now and then, which counts as
// progress and would keep pushing the deadline back.
const (
	brokenMinReady         = 1 // seconds
	brokenProgressDeadline = 2 // seconds
)

var brokenCommand = []string{agent.SelfCommand, "worker", "--crash-after", "300ms", "--exit-code", "3"}

// BrokenRolloutFigures are a rollout of a template that never becomes
// available, as the demo observed it.
type BrokenRolloutFigures struct {
	// MinReadySeconds and ProgressDeadlineSeconds are the Deployment's.
	MinReadySeconds         int32 `json:"minReadySeconds"`
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds"`
	// DeadlineExceeded is from the apply to the Deployment's Progressing
	// condition False with reason ProgressDeadlineExceeded; Message is
	// the condition's.
	DeadlineExceeded time.Duration `json:"deadlineExceededNanos"`
	Message          string        `json:"message"`
	// NewPods is how many pods of the broken template there were then,
	// CrashLooping how many of them were seen in CrashLoopBackOff, and
	// NewAvailable how many the new ReplicaSet counted available (none).
	NewPods      int   `json:"newPods"`
	CrashLooping int   `json:"crashLooping"`
	NewAvailable int32 `json:"newAvailable"`
	// Bounds are the pods' counts at every pod event meanwhile.
	Bounds RolloutFigures `json:"bounds"`
}

// brokenRollout applies a template whose container crashes, with
// minReadySeconds and a short progress deadline, and watches the rollout
// stall: the Deployment's Progressing condition becomes False with reason
// ProgressDeadlineExceeded, while at every pod event no more than
// replicas+maxSurge pods exist and no fewer than replicas-maxUnavailable
// are available.
func (d *demo) brokenRollout() error {
	dep, _, ok, err := d.st.Deployments.Get(d.ctx, demoDeployKey)
	if err != nil || !ok {
		return errors.Join(err, errors.New("no deployment "+demoDeployKey))
	}
	replicas := api.Replicas(dep.Spec.Replicas)
	ru := dep.Spec.Strategy.RollingUpdate
	surge, unavailable, err := deployment.ResolveFenceposts(ru.MaxSurge, ru.MaxUnavailable, replicas)
	if err != nil {
		return err
	}
	// The new minReadySeconds applies to every pod of the Deployment at
	// once: the apply waits until the current pods count as available by
	// it, so that the bounds are the rollout's doing.
	var pods map[string]api.Pod
	err = d.waitFor(10*time.Second+brokenMinReady*time.Second, func() (bool, string, error) {
		pods, err = d.webPods()
		if err != nil {
			return false, "", err
		}
		n := int32(0)
		for _, p := range pods {
			if available(p, brokenMinReady*time.Second, time.Now()) {
				n++
			}
		}
		return n == replicas && len(pods) == int(replicas), fmt.Sprintf("%d pods, %d ready for %ds", len(pods), n, brokenMinReady), nil
	})
	if err != nil {
		return err
	}
	old := map[string]bool{}
	for name := range pods {
		old[name] = true
	}
	t0 := time.Now()
	if _, _, err := informer.Update(d.ctx, d.st.Deployments, demoDeployKey, func(d *api.Deployment) error {
		containers := slices.Clone(d.Spec.Template.Spec.Containers)
		containers[0].Command = brokenCommand
		containers[0].ReadinessProbe = &api.Probe{Exec: &api.ExecAction{Command: []string{"true"}}, InitialDelaySeconds: 1}
		d.Spec.Template.Spec.Containers = containers
		d.Spec.MinReadySeconds = brokenMinReady
		deadline := int32(brokenProgressDeadline)
		d.Spec.ProgressDeadlineSeconds = &deadline
		return nil
	}, demoUpdateAttempts); err != nil {
		return err
	}
	d.logf("apply", "deployment.apps/web configured: command %v, a readiness probe after 1s, minReadySeconds %d, progressDeadlineSeconds %d",
		brokenCommand, brokenMinReady, brokenProgressDeadline)
	f := BrokenRolloutFigures{MinReadySeconds: brokenMinReady, ProgressDeadlineSeconds: brokenProgressDeadline,
		Bounds: RolloutFigures{MaxSurge: surge, MaxUnavailable: unavailable}}
	pids := map[int]bool{}
	wctx, stopWatch := context.WithCancel(d.ctx)
	watched := make(chan error, 1)
	go func() {
		check := rolloutBounds(&f.Bounds, replicas, brokenMinReady*time.Second, func(api.Pod) bool { return false }, pids)
		watched <- d.watchWebPods(wctx, 60*time.Second, check)
	}()
	crashLooping := map[string]bool{}
	reason := ""
	err = d.waitFor(brokenProgressDeadline*time.Second+30*time.Second, func() (bool, string, error) {
		select {
		case err := <-watched:
			watched <- err // for the join below
			if err == nil {
				err = errors.New("the pod watch ended")
			}
			return false, "", err
		default:
		}
		pods, err := d.webPods()
		if err != nil {
			return false, "", err
		}
		f.NewPods = 0
		for name, p := range pods {
			if old[name] {
				continue
			}
			f.NewPods++
			if len(p.Status.ContainerStatuses) == 0 {
				continue
			}
			cs := p.Status.ContainerStatuses[0]
			if w := cs.State.Waiting; w != nil && w.Reason == api.ReasonCrashLoopBackOff && !crashLooping[name] {
				crashLooping[name] = true
				if len(crashLooping) == 1 {
					d.logf("status", "pod %s %s: %s", name, w.Reason, w.Message)
				}
			}
		}
		dep, _, _, err := d.st.Deployments.Get(d.ctx, demoDeployKey)
		if err != nil {
			return false, "", err
		}
		c, _ := object.FindCondition(dep.Status.Conditions, api.DeploymentProgressing)
		if c.Reason != reason {
			reason = c.Reason
			d.logf("status", "deployment web Progressing=%s %s: %s (%d available, %d updated)",
				c.Status, c.Reason, c.Message, dep.Status.AvailableReplicas, dep.Status.UpdatedReplicas)
		}
		done := c.Status == object.ConditionFalse && c.Reason == api.ReasonProgressDeadlineExceeded
		if done {
			f.DeadlineExceeded, f.Message = time.Since(t0), c.Message
		}
		return done, fmt.Sprintf("Progressing=%s %s, %d new pods, %d crash-looping", c.Status, c.Reason, f.NewPods, len(crashLooping)), nil
	})
	stopWatch()
	err = errors.Join(err, <-watched)
	maps.Copy(d.pids, pids)
	f.CrashLooping = len(crashLooping)
	if err != nil {
		return err
	}
	rss, err := d.webReplicaSets()
	if err != nil {
		return err
	}
	var newRS string
	for _, rs := range rss {
		if rs.Spec.Template.Spec.Containers[0].ReadinessProbe != nil {
			newRS, f.NewAvailable = rs.Name, rs.Status.AvailableReplicas
		}
	}
	d.rep.Broken = &f
	d.logf("ok", "the rollout stalled, %v after the apply: %s has %d pods (%d seen in %s), %d available; at most %d pods above %d (bound %d), at most %d unavailable (bound %d), over %d pod events",
		f.DeadlineExceeded.Round(time.Millisecond), newRS, f.NewPods, f.CrashLooping, api.ReasonCrashLoopBackOff, f.NewAvailable,
		f.Bounds.Surge, replicas, surge, f.Bounds.Unavailable, unavailable, f.Bounds.Events)
	if f.NewAvailable != 0 || f.NewPods == 0 || !strings.Contains(f.Message, "timed out") {
		return fmt.Errorf("a broken rollout should time out with none of its %d pods available; %d available, %q",
			f.NewPods, f.NewAvailable, f.Message)
	}
	return nil
}
