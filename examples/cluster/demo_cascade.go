package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
)

// deploymentManifest is a Deployment of replicas pods labelled app=name
// running `cluster worker`, as `cluster ctl apply -f` reads it; extra is
// appended to the pod template's spec (indented by six spaces).
func deploymentManifest(name string, replicas int, extra string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: default}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: %[1]s
        command: [cluster, worker]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
%[3]s`, name, replicas, extra)
}

// createDeployment applies manifest as `cluster ctl apply` does (decoded,
// defaulted, validated, created) and returns when it was created.
func (d *demo) createDeployment(manifest string) (time.Time, error) {
	docs, err := api.Decode([]byte(manifest))
	if err != nil {
		return time.Time{}, err
	}
	dep := docs[0].Object.(*api.Deployment)
	api.Default(dep, -1)
	if err := api.Validate(dep); err != nil {
		return time.Time{}, err
	}
	t0 := time.Now()
	_, err = d.st.Deployments.Create(d.ctx, api.Key(dep.Namespace, dep.Name), *dep)
	return t0, err
}

// appRunning waits until app has exactly n pods, all Running and Ready,
// and returns them.
func (d *demo) appRunning(app string, n int, timeout time.Duration) (map[string]api.Pod, error) {
	var pods map[string]api.Pod
	err := d.waitFor(timeout, func() (bool, string, error) {
		var err error
		if pods, err = d.appPods(app); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods {
			if d.podRunning(p) {
				running++
			}
		}
		return len(pods) == n && running == n, fmt.Sprintf("%d pods of %s, %d running", len(pods), app, running), nil
	})
	return pods, err
}

// CascadeFigures are a delete's, each from the delete, as the demo
// observed it.
type CascadeFigures struct {
	Deployment string `json:"deployment"`
	Pods       int    `json:"pods"`
	// DeploymentGone, ReplicaSetsGone and PodsGone are when the last of
	// each was seen gone; ProcessesGone, when the pods' last process was.
	DeploymentGone  time.Duration `json:"deploymentGoneNanos"`
	ReplicaSetsGone time.Duration `json:"replicaSetsGoneNanos,omitempty"`
	PodsGone        time.Duration `json:"podsGoneNanos,omitempty"`
	ProcessesGone   time.Duration `json:"processesGoneNanos,omitempty"`
	// Orphaned (orphan only): the ReplicaSet left without owner and its
	// pods, still running the same processes.
	Orphaned     string `json:"orphaned,omitempty"`
	OrphansAlive int    `json:"orphansAlive,omitempty"`
}

// backgroundDelete runs `cluster ctl delete deployment/NAME` (background,
// kubectl's default): the Deployment is gone once the delete returns, and
// the garbage collector deletes its ReplicaSets, then their pods, after.
func (d *demo) backgroundDelete(name string) error {
	key := api.Key(api.DefaultNamespace, name)
	rss, err := d.replicaSetsOf(key)
	if err != nil {
		return err
	}
	pods, err := d.appPods(name)
	if err != nil {
		return err
	}
	f := CascadeFigures{Deployment: name, Pods: len(pods)}
	rsWatch, err := watchArrivals(d.ctx, d.st.ReplicaSets, func(rs api.ReplicaSet) bool { return rs.Labels["app"] == name })
	if err != nil {
		return err
	}
	defer rsWatch.close()
	podWatch, err := watchArrivals(d.ctx, d.st.Pods, func(p api.Pod) bool { return p.Labels["app"] == name })
	if err != nil {
		return err
	}
	defer podWatch.close()
	t0 := time.Now()
	if err := d.ctl("delete", "deployment/"+name, "--cascade=background"); err != nil {
		return err
	}
	f.DeploymentGone = time.Since(t0)
	_, _, depLeft, err := d.st.Deployments.Get(d.ctx, key)
	if err != nil {
		return err
	}
	if depLeft {
		return fmt.Errorf("deployment %s is still there after a background delete returned", name)
	}
	err = d.waitFor(30*time.Second, func() (bool, string, error) {
		// Dependents are read before their owners: an owner seen after
		// some of its dependents were seen gone outlived them.
		left, err := d.appPods(name)
		if err != nil {
			return false, "", err
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
		seen := fmt.Sprintf("%d ReplicaSets, %d pods", rsLeft, len(left))
		if rsLeft > 0 && len(left) < len(pods) {
			return false, seen, fmt.Errorf("pods went before their ReplicaSet: %s", seen)
		}
		_, rsSeen := rsWatch.counts()
		_, podsSeen := podWatch.counts()
		seen += fmt.Sprintf("; the watches saw %d ReplicaSets and %d pods deleted", rsSeen, podsSeen)
		return rsLeft == 0 && len(left) == 0 && rsSeen == len(rss) && podsSeen == len(pods), seen, nil
	})
	if err != nil {
		return err
	}
	// The watches tell when each delete was written, to the millisecond:
	// a poll of 50 pods takes longer than the whole collection.
	rsWatch.close()
	podWatch.close()
	if len(rsWatch.deleted) != len(rss) || len(podWatch.deleted) != len(pods) {
		return fmt.Errorf("the watches saw %d of %d ReplicaSets and %d of %d pods deleted",
			len(rsWatch.deleted), len(rss), len(podWatch.deleted), len(pods))
	}
	for _, t := range rsWatch.deleted {
		f.ReplicaSetsGone = max(f.ReplicaSetsGone, t.Sub(t0))
	}
	first := time.Duration(0)
	for _, t := range podWatch.deleted {
		f.PodsGone = max(f.PodsGone, t.Sub(t0))
		if first == 0 || t.Sub(t0) < first {
			first = t.Sub(t0)
		}
	}
	ms := func(t time.Duration) time.Duration { return t.Round(100 * time.Microsecond) }
	d.logf("delete", "deployment %s gone when the delete returned, %v after it; then the garbage collector deleted its ReplicaSet (by %v) and its %d pods (from %v to %v)",
		name, ms(f.DeploymentGone), ms(f.ReplicaSetsGone), len(pods), ms(first), ms(f.PodsGone))
	mark := d.marker(t0, "after the delete")
	err = d.processesGone(pods, &f.ProcessesGone, mark)
	d.rep.Background = &f
	return err
}

// orphanDelete runs `cluster ctl delete deployment/NAME --cascade=orphan`:
// the Deployment goes, its ReplicaSet stays without an owner and its pods
// keep running the same processes. Then it deletes the ReplicaSet, and
// its pods and their processes go.
func (d *demo) orphanDelete(name string) error {
	key := api.Key(api.DefaultNamespace, name)
	rss, err := d.replicaSetsOf(key)
	if err != nil {
		return err
	}
	if len(rss) != 1 {
		return fmt.Errorf("deployment %s: want 1 ReplicaSet, have %d", name, len(rss))
	}
	rs := rss[0]
	pods, err := d.appPods(name)
	if err != nil {
		return err
	}
	f := CascadeFigures{Deployment: name, Pods: len(pods), Orphaned: rs.Name}
	t0 := time.Now()
	if err := d.ctl("delete", "deployment/"+name, "--cascade=orphan"); err != nil {
		return err
	}
	mark := d.marker(t0, "after the delete")
	err = d.waitFor(30*time.Second, func() (bool, string, error) {
		_, _, depLeft, err := d.st.Deployments.Get(d.ctx, key)
		if err != nil {
			return false, "", err
		}
		if depLeft {
			return false, "the deployment is still there", nil
		}
		got, _, ok, err := d.st.ReplicaSets.Get(d.ctx, api.Key(rs.Namespace, rs.Name))
		if err != nil || !ok {
			return false, "", fmt.Errorf("replicaset %s went with its deployment (%v)", rs.Name, err)
		}
		if len(got.OwnerReferences) > 0 {
			return false, fmt.Sprintf("replicaset %s still has owners %v", rs.Name, got.OwnerReferences), nil
		}
		left, err := d.appPods(name)
		if err != nil {
			return false, "", err
		}
		alive := 0
		for pname, p := range left {
			old, was := pods[pname]
			if was && d.podRunning(p) && p.Status.ContainerStatuses[0].PID == old.Status.ContainerStatuses[0].PID {
				alive++
			}
		}
		if alive != len(pods) {
			return false, "", fmt.Errorf("the orphans should keep running as they were: %d of %d do", alive, len(pods))
		}
		f.OrphansAlive = alive
		mark(&f.DeploymentGone, "delete", "deployment %s gone; replicaset %s stays, with no ownerReferences, and its %d pods run the same processes",
			name, rs.Name, alive)
		return true, "", nil
	})
	if err != nil {
		d.rep.Orphan = &f
		return err
	}
	if err := d.ctl("delete", "replicaset/"+rs.Name); err != nil {
		return err
	}
	err = d.waitFor(30*time.Second, func() (bool, string, error) {
		left, err := d.appPods(name)
		if err != nil {
			return false, "", err
		}
		if len(left) == 0 {
			mark(&f.PodsGone, "delete", "cleaned up: replicaset %s deleted, then its pods", rs.Name)
		}
		return len(left) == 0, fmt.Sprintf("%d pods of %s left", len(left), name), nil
	})
	if err == nil {
		err = d.processesGone(pods, &f.ProcessesGone, mark)
	}
	d.rep.Orphan = &f
	return err
}

// processesGone waits until the processes of pods are gone.
func (d *demo) processesGone(pods map[string]api.Pod, at *time.Duration, mark func(*time.Duration, string, string, ...any)) error {
	return d.waitFor(30*time.Second, func() (bool, string, error) {
		for _, p := range pods {
			if cs := p.Status.ContainerStatuses; len(cs) > 0 && alive(cs[0].PID) {
				return false, fmt.Sprintf("pid %d of %s still runs", cs[0].PID, p.Name), nil
			}
		}
		mark(at, "ok", "their %d processes are gone", len(pods))
		return true, "", nil
	})
}

// marker returns a function that sets *at, once, to the time since t0 and
// logs it, "<what>, <time> <since>".
func (d *demo) marker(t0 time.Time, since string) func(at *time.Duration, verb, format string, args ...any) {
	return func(at *time.Duration, verb, format string, args ...any) {
		if *at == 0 {
			*at = time.Since(t0)
			d.logf(verb, "%s, %v %s", strings.TrimSpace(fmt.Sprintf(format, args...)), at.Round(time.Millisecond), since)
		}
	}
}
