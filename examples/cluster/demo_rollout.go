package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/deployment"
	"github.com/converge-go/converge/examples/cluster/ctl"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// RolloutFigures are a rolling update's, as the demo observed it through
// a watch on the pods.
type RolloutFigures struct {
	// Duration is from the template's change to every pod of the new
	// ReplicaSet Running and Ready and no old pod left.
	Duration time.Duration `json:"durationNanos"`
	// MaxSurge and MaxUnavailable are the bounds the strategy allows, in
	// pods.
	MaxSurge       int32 `json:"maxSurge"`
	MaxUnavailable int32 `json:"maxUnavailable"`
	// Surge is the most pods above replicas and Unavailable the most
	// below replicas available, at any moment observed; Events is the
	// number of pod events observed.
	Surge       int32 `json:"surge"`
	Unavailable int32 `json:"unavailable"`
	Events      int   `json:"events"`
}

var errObserved = errors.New("observed")

// demoUpdateAttempts bounds the demo's edits of the Deployment, which the
// deployment controller writes too (its status): on a loaded machine over
// etcd, the default number of attempts was seen to conflict every time.
var demoUpdateAttempts = informer.WithAttempts(20)

// watchWebPods calls check with the Deployment's pods (app=web, by name)
// as listed, then after every pod event of a watch from that list, until
// check says done or fails, ctx ends, or timeout passes.
func (d *demo) watchWebPods(ctx context.Context, timeout time.Duration, check func(pods map[string]api.Pod) (done bool, seen string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	entries, rev, err := d.st.Pods.List(ctx)
	if err != nil {
		return err
	}
	pods := map[string]api.Pod{}
	for _, e := range entries {
		if e.Err == nil && e.Value.Labels["app"] == "web" {
			pods[e.Value.Name] = e.Value
		}
	}
	done, seen, err := check(pods)
	if err != nil || done {
		return err
	}
	err = d.st.Pods.Watch(ctx, rev, func(ev informer.Event[string, api.Pod]) error {
		_, name := api.SplitKey(ev.Key)
		switch {
		case ev.Type == informer.Delete:
			delete(pods, name)
		case ev.Type == informer.Put && ev.Err == nil && ev.Value.Labels["app"] == "web":
			pods[name] = ev.Value
		default:
			return nil
		}
		var err error
		if done, seen, err = check(pods); err != nil {
			return err
		}
		if done {
			return errObserved
		}
		return nil
	})
	if errors.Is(err, errObserved) {
		return nil
	}
	if ctx.Err() != nil && d.ctx.Err() == nil {
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return fmt.Errorf("not observed within %v; last seen: %s", timeout, seen)
		}
		return nil // the caller ended the watch
	}
	return err
}

// available reports whether p counts as available at now: Ready for at
// least minReady, as the ReplicaSet controller counts it.
func available(p api.Pod, minReady time.Duration, now time.Time) bool {
	c, ok := object.FindCondition(p.Status.Conditions, api.PodReady)
	return p.Status.Phase == api.PodRunning && ok && c.Status == object.ConditionTrue &&
		!c.LastTransitionTime.Add(minReady).After(now)
}

// rolloutBounds returns a check for watchWebPods that fails as soon as it
// sees more than replicas+f.MaxSurge pods or fewer than
// replicas-f.MaxUnavailable available (Ready for minReady), records the
// largest surge and unavailability in f and the pods' processes in pids,
// and is done once replicas pods, all isNew, are Ready and no other is
// left.
func rolloutBounds(f *RolloutFigures, replicas int32, minReady time.Duration, isNew func(api.Pod) bool, pids map[int]bool) func(map[string]api.Pod) (bool, string, error) {
	return func(pods map[string]api.Pod) (bool, string, error) {
		f.Events++
		now := time.Now()
		avail, updated := int32(0), int32(0)
		for _, p := range pods {
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].PID > 0 {
				pids[p.Status.ContainerStatuses[0].PID] = true
			}
			if available(p, minReady, now) {
				avail++
			}
			if p.Status.Phase == api.PodRunning && p.IsReady() && isNew(p) {
				updated++
			}
		}
		total := int32(len(pods))
		f.Surge = max(f.Surge, total-replicas)
		f.Unavailable = max(f.Unavailable, replicas-avail)
		seen := fmt.Sprintf("%d pods, %d available, %d new ready", total, avail, updated)
		if total > replicas+f.MaxSurge || avail < replicas-f.MaxUnavailable {
			return false, seen, fmt.Errorf("the rollout broke its bounds: %s (at most %d pods, at least %d available)",
				seen, replicas+f.MaxSurge, replicas-f.MaxUnavailable)
		}
		return total == replicas && updated == replicas, seen, nil
	}
}

// watchRollout watches the Deployment's pods with rolloutBounds until
// the rollout is done or breaks its bounds.
func (d *demo) watchRollout(f *RolloutFigures, replicas int32, minReady time.Duration, isNew func(api.Pod) bool) error {
	return d.watchWebPods(d.ctx, 60*time.Second, rolloutBounds(f, replicas, minReady, isNew, d.pids))
}

// rollingUpdate changes the template's command, as `cluster ctl apply`
// of the edited manifest does, and watches the rollout: at every pod event
// no more than replicas+maxSurge pods and no fewer than
// replicas-maxUnavailable available.
func (d *demo) rollingUpdate() error {
	dep, _, ok, err := d.st.Deployments.Get(d.ctx, demoDeployKey)
	if err != nil || !ok {
		return errors.Join(err, errors.New("no deployment "+demoDeployKey))
	}
	replicas := api.Replicas(dep.Spec.Replicas)
	ru := dep.Spec.Strategy.RollingUpdate
	if ru == nil {
		return errors.New("the deployment has no rolling update strategy")
	}
	surge, unavailable, err := deployment.ResolveFenceposts(ru.MaxSurge, ru.MaxUnavailable, replicas)
	if err != nil {
		return err
	}
	old := map[string]bool{}
	pods, err := d.webPods()
	if err != nil {
		return err
	}
	for name := range pods {
		old[name] = true
	}
	command := []string{agent.SelfCommand, "worker", "--exit-code", "0"}
	t0 := time.Now()
	if _, _, err := informer.Update(d.ctx, d.st.Deployments, demoDeployKey, func(d *api.Deployment) error {
		// A new slice: the value read shares the old one, and Update
		// compares the two.
		containers := slices.Clone(d.Spec.Template.Spec.Containers)
		containers[0].Command = command
		d.Spec.Template.Spec.Containers = containers
		return nil
	}, demoUpdateAttempts); err != nil {
		return err
	}
	d.logf("apply", "deployment.apps/web configured: command %v (maxSurge %s = %d, maxUnavailable %s = %d)",
		command, ru.MaxSurge, surge, ru.MaxUnavailable, unavailable)
	f := RolloutFigures{MaxSurge: surge, MaxUnavailable: unavailable}
	if err := d.watchRollout(&f, replicas, minReady(dep), func(p api.Pod) bool { return !old[p.Name] }); err != nil {
		return err
	}
	f.Duration = time.Since(t0)
	d.rep.Rollout = &f
	rss, err := d.webReplicaSets()
	if err != nil {
		return err
	}
	d.logf("ok", "rolled out to a new ReplicaSet in %v (%d ReplicaSets): at most %d pods above %d (bound %d), at most %d unavailable (bound %d), over %d pod events",
		f.Duration.Round(time.Millisecond), len(rss), f.Surge, replicas, surge, f.Unavailable, unavailable, f.Events)
	if len(rss) != 2 {
		return fmt.Errorf("want the old and the new ReplicaSet, have %d", len(rss))
	}
	return nil
}

// UndoFigures are a `rollout undo`'s.
type UndoFigures struct {
	// Duration is from the undo to the old ReplicaSet's pods all Running
	// and Ready, none of the others left, and the Deployment complete.
	Duration   time.Duration `json:"durationNanos"`
	ReplicaSet string        `json:"replicaSet"`
	// Revision is the old ReplicaSet's revision before and after.
	RevisionBefore int64 `json:"revisionBefore"`
	Revision       int64 `json:"revision"`
	// Surge and Unavailable as in RolloutFigures.
	Surge       int32 `json:"surge"`
	Unavailable int32 `json:"unavailable"`
}

// ctl runs `cluster ctl ARGS` against the demo's control plane and logs
// what it prints.
func (d *demo) ctl(args ...string) error {
	var out, errOut strings.Builder
	if code := ctl.Run(d.ctx, append([]string{"--api", d.url, "--token", ""}, args...), &out, &errOut); code != 0 {
		return fmt.Errorf("cluster ctl %s: status %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
	}
	d.logf("ctl", "cluster ctl %s: %s", strings.Join(args, " "), strings.TrimSpace(out.String()))
	return nil
}

// rolloutUndo runs `cluster ctl rollout undo` and watches the rollout back
// to the previous revision's ReplicaSet, within the same bounds; that
// ReplicaSet gets the next revision, and the Deployment is complete again.
func (d *demo) rolloutUndo() error {
	rss, err := d.webReplicaSets()
	if err != nil {
		return err
	}
	if len(rss) < 2 {
		return fmt.Errorf("want at least 2 ReplicaSets, have %d", len(rss))
	}
	slices.SortFunc(rss, func(a, b api.ReplicaSet) int { return int(rsRevision(a) - rsRevision(b)) })
	target, current := rss[len(rss)-2], rss[len(rss)-1]
	dep, _, _, err := d.st.Deployments.Get(d.ctx, demoDeployKey)
	if err != nil {
		return err
	}
	ru := dep.Spec.Strategy.RollingUpdate
	replicas := api.Replicas(dep.Spec.Replicas)
	surge, unavailable, err := deployment.ResolveFenceposts(ru.MaxSurge, ru.MaxUnavailable, replicas)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := d.ctl("rollout", "undo", "deployment/web"); err != nil {
		return err
	}
	f := RolloutFigures{MaxSurge: surge, MaxUnavailable: unavailable}
	hash := target.Labels[api.PodTemplateHashLabel]
	if err := d.watchRollout(&f, replicas, minReady(dep), func(p api.Pod) bool { return p.Labels[api.PodTemplateHashLabel] == hash }); err != nil {
		return err
	}
	u := UndoFigures{ReplicaSet: target.Name, RevisionBefore: rsRevision(target), Surge: f.Surge, Unavailable: f.Unavailable}
	err = d.waitFor(10*time.Second+minReady(dep), func() (bool, string, error) {
		rs, _, _, err := d.st.ReplicaSets.Get(d.ctx, api.Key(target.Namespace, target.Name))
		if err != nil {
			return false, "", err
		}
		dep, _, _, err := d.st.Deployments.Get(d.ctx, demoDeployKey)
		if err != nil {
			return false, "", err
		}
		u.Revision = rsRevision(rs)
		c, _ := object.FindCondition(dep.Status.Conditions, api.DeploymentProgressing)
		return u.Revision > rsRevision(current) && api.Replicas(rs.Spec.Replicas) == replicas && c.Reason == api.ReasonNewReplicaSetAvailable,
			fmt.Sprintf("%s: revision %d, %d replicas; deployment Progressing=%s %s", rs.Name, u.Revision,
				api.Replicas(rs.Spec.Replicas), c.Status, c.Reason), nil
	})
	if err != nil {
		return err
	}
	u.Duration = time.Since(t0)
	d.rep.Undo = &u
	d.logf("ok", "back to %s (%d replicas, revision %d → %d), Progressing=True %s, in %v: at most %d pods above %d, at most %d unavailable",
		target.Name, replicas, u.RevisionBefore, u.Revision, api.ReasonNewReplicaSetAvailable, u.Duration.Round(time.Millisecond),
		u.Surge, replicas, u.Unavailable)
	return nil
}

// minReady is d's minReadySeconds.
func minReady(d api.Deployment) time.Duration {
	return time.Duration(d.Spec.MinReadySeconds) * time.Second
}

func rsRevision(rs api.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[api.RevisionAnnotation], 10, 64)
	return n
}
