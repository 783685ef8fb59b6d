package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
)

// DeleteFigures are a foreground delete's, each from the delete, as the
// demo observed it.
type DeleteFigures struct {
	PodsGone        time.Duration `json:"podsGoneNanos"`
	ReplicaSetsGone time.Duration `json:"replicaSetsGoneNanos"`
	DeploymentGone  time.Duration `json:"deploymentGoneNanos"`
	// ProcessesGone: the last of the pods' processes stopped.
	ProcessesGone time.Duration `json:"processesGoneNanos"`
}

// foregroundDelete runs `cluster ctl delete --cascade=foreground` of the
// Deployment: its ReplicaSets and pods must be gone before it is, and no
// process of theirs left.
func (d *demo) foregroundDelete() error {
	rss, err := d.webReplicaSets()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := d.ctl("delete", "deployment/web", "--cascade=foreground"); err != nil {
		return err
	}
	var f DeleteFigures
	marked := false
	mark := func(at *time.Duration, verb, format string, args ...any) {
		if *at == 0 {
			*at = time.Since(t0)
			d.logf(verb, "%s, %v after the delete", fmt.Sprintf(format, args...), at.Round(time.Millisecond))
		}
	}
	err = d.waitFor(30*time.Second, func() (bool, string, error) {
		// The Deployment is read first: once it is gone, whatever of its
		// dependents is read afterwards outlived it.
		dep, _, depLeft, err := d.st.Deployments.Get(d.ctx, demoDeployKey)
		if err != nil {
			return false, "", err
		}
		if depLeft && !slices.Contains(dep.Finalizers, api.FinalizerForeground) {
			return false, "", fmt.Errorf("the deployment has no %s finalizer: %v", api.FinalizerForeground, dep.Finalizers)
		}
		rsLeft := 0
		for _, rs := range rss {
			_, _, ok, err := d.st.ReplicaSets.Get(d.ctx, api.Key(rs.Namespace, rs.Name))
			if err != nil {
				return false, "", err
			}
			if ok {
				rsLeft++
			}
		}
		pods, err := d.webPods()
		if err != nil {
			return false, "", err
		}
		if depLeft && !marked {
			marked = true
			d.logf("status", "deployment default/web deleting, held by its %s finalizer: %d ReplicaSets, %d pods",
				api.FinalizerForeground, rsLeft, len(pods))
		}
		seen := fmt.Sprintf("deployment left: %v, %d ReplicaSets, %d pods", depLeft, rsLeft, len(pods))
		if !depLeft && (rsLeft > 0 || len(pods) > 0) {
			return false, seen, fmt.Errorf("the deployment went before its dependents: %s", seen)
		}
		if len(pods) == 0 {
			mark(&f.PodsGone, "delete", "the pods are gone")
		}
		if rsLeft == 0 {
			mark(&f.ReplicaSetsGone, "delete", "the ReplicaSets are gone")
		}
		if !depLeft {
			mark(&f.DeploymentGone, "delete", "then the Deployment")
		}
		return !depLeft, seen, nil
	})
	if err != nil {
		return err
	}
	err = d.waitFor(30*time.Second, func() (bool, string, error) {
		for pid := range d.pids {
			if alive(pid) {
				return false, fmt.Sprintf("pid %d still runs", pid), nil
			}
		}
		mark(&f.ProcessesGone, "ok", "nothing runs")
		return true, "", nil
	})
	d.rep.Delete = &f
	return err
}
