package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// The demo's Deployment: what `cluster ctl apply -f` of the README's
// manifest writes.
const (
	demoDeployKey      = "default/web"
	demoReplicas       = 6
	demoDeployManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        command: [cluster, worker]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
`
)

// DeployTimes split a Deployment's start, each from the apply, as the demo
// observed it.
type DeployTimes struct {
	ReplicaSetCreated time.Duration `json:"replicaSetCreatedNanos"`
	PodsCreated       time.Duration `json:"podsCreatedNanos"`
	AllBound          time.Duration `json:"allBoundNanos"`
	AllRunning        time.Duration `json:"allRunningNanos"`
	// Spread is the number of the Deployment's pods on each node.
	Spread map[string]int `json:"spread"`
}

// webPods returns the pods of the demo's Deployment (app=web), by name.
func (d *demo) webPods() (map[string]api.Pod, error) { return d.appPods("web") }

// appPods returns the pods labelled app=app, by name.
func (d *demo) appPods(app string) (map[string]api.Pod, error) {
	entries, _, err := d.st.Pods.List(d.ctx)
	if err != nil {
		return nil, err
	}
	pods := map[string]api.Pod{}
	for _, e := range entries {
		if e.Err == nil && e.Value.Labels["app"] == app {
			pods[e.Value.Name] = e.Value
		}
	}
	return pods, nil
}

// webReplicaSets returns the ReplicaSets the demo's Deployment controls.
func (d *demo) webReplicaSets() ([]api.ReplicaSet, error) { return d.replicaSetsOf(demoDeployKey) }

// replicaSetsOf returns the ReplicaSets Deployment key controls.
func (d *demo) replicaSetsOf(key string) ([]api.ReplicaSet, error) {
	dep, _, ok, err := d.st.Deployments.Get(d.ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	entries, _, err := d.st.ReplicaSets.List(d.ctx)
	if err != nil {
		return nil, err
	}
	var rss []api.ReplicaSet
	for _, e := range entries {
		if r, ok := api.ControllerOf(e.Value.Metadata); e.Err == nil && ok && r.UID == dep.UID {
			rss = append(rss, e.Value)
		}
	}
	return rss, nil
}

// podRunning reports whether p's container runs a live process and p is
// Ready; it remembers the process for the final check.
func (d *demo) podRunning(p api.Pod) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.PID > 0 {
		d.pids[cs.PID] = true
	}
	return p.Status.Phase == api.PodRunning && cs.State.Running != nil && p.IsReady() && alive(cs.PID)
}

// spread counts pods per node ("" for the unbound).
func spread(pods map[string]api.Pod) map[string]int {
	n := map[string]int{}
	for _, p := range pods {
		n[p.Spec.NodeName]++
	}
	return n
}

// applyDeployment applies the demo's Deployment as `cluster ctl apply`
// does (decoded, defaulted, validated, created) and waits until its 6
// pods run, no node with more than 2 of them.
func (d *demo) applyDeployment() error {
	docs, err := api.Decode([]byte(demoDeployManifest))
	if err != nil {
		return err
	}
	dep := docs[0].Object.(*api.Deployment)
	api.Default(dep, -1)
	if err := api.Validate(dep); err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := d.st.Deployments.Create(d.ctx, demoDeployKey, *dep); err != nil {
		return err
	}
	d.logf("apply", "deployment.apps/web created: %d replicas of `%s worker`", demoReplicas, agent.SelfCommand)
	var t DeployTimes
	mark := func(at *time.Duration, verb, format string, args ...any) {
		if *at == 0 {
			*at = time.Since(t0)
			d.logf(verb, "%s, %v after the apply", fmt.Sprintf(format, args...), at.Round(time.Millisecond))
		}
	}
	err = d.waitFor(30*time.Second, func() (bool, string, error) {
		rss, err := d.webReplicaSets()
		if err != nil {
			return false, "", err
		}
		if len(rss) > 0 {
			mark(&t.ReplicaSetCreated, "rs", "replicaset %s created", rss[0].Name)
		}
		pods, err := d.webPods()
		if err != nil {
			return false, "", err
		}
		bound, running := 0, 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
			if d.podRunning(p) {
				running++
			}
		}
		if len(pods) >= demoReplicas {
			mark(&t.PodsCreated, "pods", "%d pods created", len(pods))
		}
		if bound >= demoReplicas {
			mark(&t.AllBound, "bind", "%d pods bound", bound)
		}
		done := len(pods) == demoReplicas && running == demoReplicas
		if done {
			mark(&t.AllRunning, "ok", "%d pods Running and Ready", running)
			t.Spread = spread(pods)
		}
		return done, fmt.Sprintf("%d pods, %d bound, %d running", len(pods), bound, running), nil
	})
	if err != nil {
		return err
	}
	d.rep.Deploy = &t
	for node, n := range t.Spread {
		if n > 2 || !slices.Contains(demoNodes, node) {
			return fmt.Errorf("the pods are not spread over the nodes: %v", t.Spread)
		}
	}
	d.logf("ok", "spread %s (no node has more than 2)", perNode(t.Spread))
	return nil
}

// perNode prints a count per node, by node name.
func perNode(counts map[string]int) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s: %d", n, counts[n]))
	}
	return strings.Join(parts, ", ")
}

// NodeDeathTimes split a node's death, each from its agent's kill -9, as
// the demo observed it.
type NodeDeathTimes struct {
	Node string `json:"node"`
	// Detected: the node's Ready condition Unknown (the lease's grace
	// period ran out).
	Detected time.Duration `json:"detectedNanos"`
	// Tainted: a NoExecute taint on the node.
	Tainted time.Duration `json:"taintedNanos"`
	// Evicted: the last of its pods deleted (their toleration ran out).
	Evicted time.Duration `json:"evictedNanos"`
	// Created, Bound, Running: the last replacement created, bound to
	// another node, Running and Ready.
	Created time.Duration `json:"createdNanos"`
	Bound   time.Duration `json:"boundNanos"`
	Running time.Duration `json:"runningNanos"`
	// Replacements is where the replacements went, by node.
	Replacements map[string]int `json:"replacements"`
}

// nodeDeath kills n3's agent and follows the node lifecycle controller:
// the node Unknown, tainted, its pods evicted and replaced on n1 and n2.
func (d *demo) nodeDeath() error {
	const dead = "n3"
	before, err := d.webPods()
	if err != nil {
		return err
	}
	var victims []string
	for name, p := range before {
		if p.Spec.NodeName == dead {
			victims = append(victims, name)
		}
	}
	slices.Sort(victims)
	a := d.agents[dead]
	t0 := time.Now()
	if err := a.Process.Kill(); err != nil {
		return err
	}
	_ = a.Wait()
	delete(d.agents, dead)
	d.logf("kill", "kill -9 %d (%s's agent, running %s)", a.Process.Pid, dead, strings.Join(victims, ", "))
	t := NodeDeathTimes{Node: dead}
	mark := func(at *time.Duration, verb, format string, args ...any) {
		if *at == 0 {
			*at = time.Since(t0)
			d.logf(verb, "%s, %v after the kill", fmt.Sprintf(format, args...), at.Round(time.Millisecond))
		}
	}
	timeout := d.timings.NodeMonitorGracePeriod + time.Duration(d.timings.DefaultTolerationSeconds)*time.Second + 30*time.Second
	err = d.waitFor(timeout, func() (bool, string, error) {
		node, _, _, err := d.st.Nodes.Get(d.ctx, dead)
		if err != nil {
			return false, "", err
		}
		if nodeCondition(node, api.NodeReady) == object.ConditionUnknown {
			mark(&t.Detected, "status", "node %s Ready=Unknown", dead)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Effect == api.TaintNoExecute {
				mark(&t.Tainted, "taint", "node %s tainted %s:%s", dead, taint.Key, taint.Effect)
			}
		}
		pods, err := d.webPods()
		if err != nil {
			return false, "", err
		}
		left := 0
		for _, name := range victims {
			if _, ok := pods[name]; ok {
				left++
			}
		}
		if left == 0 {
			mark(&t.Evicted, "evict", "%s's %d pods deleted", dead, len(victims))
		}
		created, bound, running := 0, 0, 0
		for name, p := range pods {
			if _, old := before[name]; old {
				continue
			}
			created++
			if p.Spec.NodeName != "" {
				bound++
			}
			if d.podRunning(p) {
				running++
			}
		}
		n := len(victims)
		if created >= n {
			mark(&t.Created, "pods", "%d replacements created", created)
		}
		if bound >= n {
			mark(&t.Bound, "bind", "%d replacements bound", bound)
		}
		done := left == 0 && len(pods) == demoReplicas && running == n
		if done {
			t.Replacements = map[string]int{}
			for name, p := range pods {
				if _, old := before[name]; !old {
					t.Replacements[p.Spec.NodeName]++
				}
			}
			mark(&t.Running, "ok", "%d replacements Running and Ready (%s)", running, perNode(t.Replacements))
		}
		return done, fmt.Sprintf("node %s Ready=%s, %d of its pods left, %d replacements (%d bound, %d running)",
			dead, nodeCondition(node, api.NodeReady), left, created, bound, running), nil
	})
	if err != nil {
		return err
	}
	d.rep.NodeDeath = &t
	if t.Replacements[dead] > 0 || t.Detected == 0 || t.Tainted == 0 {
		return fmt.Errorf("node %s: detected after %v, tainted after %v, replacements %v", dead, t.Detected, t.Tainted, t.Replacements)
	}
	return nil
}

// nodeCondition returns the status of a node's condition, "" if it has none.
func nodeCondition(n api.Node, typ string) object.ConditionStatus {
	c, _ := object.FindCondition(n.Status.Conditions, typ)
	return c.Status
}
