package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// The thundering herd: herdReplicas pods over five nodes, two of whose
// agents are killed at once. Its pods tolerate an unreachable or not-ready
// node for herdTolerationSeconds, not the default, so that the scene is
// short; the eviction rate is the node lifecycle controller's.
const (
	herdName              = "herd"
	herdReplicas          = 50
	herdTolerationSeconds = 2
)

// herdNodes are the nodes of the scene; the last two are killed.
var herdNodes = []string{"n1", "n2", "n3", "n4", "n5"}

// HerdFigures are the thundering herd's, each from the kill of the two
// agents, as the demo observed it.
type HerdFigures struct {
	Pods int `json:"pods"`
	// Started is from the Deployment's creation to all its pods Running
	// and Ready.
	Started time.Duration `json:"startedNanos"`
	// Nodes are the two nodes killed, each with its own split.
	Nodes []HerdNode `json:"nodes"`
	// EvictionRate is the node lifecycle's rate (nodes a second) and
	// TaintGap the time between the two nodes' NoExecute taints.
	EvictionRate float64       `json:"evictionRate"`
	TaintGap     time.Duration `json:"taintGapNanos"`
	// Waves are the replacements' creations, grouped where 250 ms or more
	// pass without one, as a watch saw them arrive.
	Waves []HerdWave `json:"waves"`
	// Running is when the last replacement was Running and Ready.
	Running time.Duration `json:"runningNanos"`
	// Replacements is where the replacements went, by node.
	Replacements map[string]int `json:"replacements"`
}

// HerdNode is one killed node's part of the herd.
type HerdNode struct {
	Name     string        `json:"name"`
	Pods     int           `json:"pods"`
	Detected time.Duration `json:"detectedNanos"`
	Tainted  time.Duration `json:"taintedNanos"`
	// FirstEvicted and Evicted: its first and last pod deleted.
	FirstEvicted time.Duration `json:"firstEvictedNanos"`
	Evicted      time.Duration `json:"evictedNanos"`
}

// HerdWave is replacements created close together.
type HerdWave struct {
	At      time.Duration `json:"atNanos"`
	Span    time.Duration `json:"spanNanos"`
	Created int           `json:"created"`
	// Batches are the replicaset controller's slow-start batches (1, 2,
	// 4, …) for that many creates in one sync. They are the rule's, not
	// observed: the batches run one after another and every create
	// succeeded, so nothing outside the controller tells them apart.
	Batches []int `json:"slowStartBatches"`
}

// thunderingHerd brings n3 back and two more nodes in, runs herdReplicas
// pods over the five, kills n4's and n5's agents at once, and follows the
// node lifecycle controller's rate-limited taints, the evictions and the
// replacements.
func (d *demo) thunderingHerd() error {
	for _, n := range herdNodes {
		if d.agents[n] == nil {
			if err := d.startAgent(n, "4", "8Gi"); err != nil {
				return err
			}
			d.logf("agent", "%s started (pid %d)", n, d.agents[n].Process.Pid)
		}
	}
	err := d.waitFor(30*time.Second, func() (bool, string, error) {
		var ready []string
		for _, n := range herdNodes {
			node, _, _, err := d.st.Nodes.Get(d.ctx, n)
			if err != nil {
				return false, "", err
			}
			if object.IsTrue(node.Status.Conditions, api.NodeReady) && len(node.Spec.Taints) == 0 {
				ready = append(ready, n)
			}
		}
		return len(ready) == len(herdNodes), fmt.Sprintf("ready and untainted: %v", ready), nil
	})
	if err != nil {
		return err
	}
	d.logf("ok", "nodes %s Ready and untainted (n3 rejoined)", strings.Join(herdNodes, ", "))
	toleration := fmt.Sprintf(`      tolerations:
      - {key: %s, operator: Exists, effect: NoExecute, tolerationSeconds: %d}
      - {key: %s, operator: Exists, effect: NoExecute, tolerationSeconds: %d}
`, api.TaintNodeUnreachable, herdTolerationSeconds, api.TaintNodeNotReady, herdTolerationSeconds)
	created, err := d.createDeployment(deploymentManifest(herdName, herdReplicas, toleration))
	if err != nil {
		return err
	}
	d.logf("apply", "deployment.apps/%s created: %d replicas, tolerating a lost node for %ds", herdName, herdReplicas, herdTolerationSeconds)
	before, err := d.appRunning(herdName, herdReplicas, 90*time.Second)
	if err != nil {
		return err
	}
	f := HerdFigures{Pods: herdReplicas, Started: time.Since(created), EvictionRate: d.timings.NodeEvictionRate}
	d.logf("ok", "%d pods Running and Ready, %v after the apply: %s", herdReplicas, f.Started.Round(time.Millisecond), perNode(spread(before)))
	victims := herdNodes[len(herdNodes)-2:]
	onNode := map[string][]string{}
	for name, p := range before {
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], name)
	}
	watch, err := watchArrivals(d.ctx, d.st.Pods, func(p api.Pod) bool { return p.Labels["app"] == herdName })
	if err != nil {
		return err
	}
	defer watch.close()
	t0 := time.Now()
	for _, n := range victims {
		if err := d.agents[n].Process.Kill(); err != nil {
			return err
		}
	}
	for _, n := range victims {
		_ = d.agents[n].Wait()
		delete(d.agents, n)
		f.Nodes = append(f.Nodes, HerdNode{Name: n, Pods: len(onNode[n])})
	}
	d.logf("kill", "kill -9 the agents of %s at once (%d and %d pods)", strings.Join(victims, " and "), len(onNode[victims[0]]), len(onNode[victims[1]]))
	mark := d.marker(t0, "after the kill")
	lost := 0
	for _, n := range victims {
		lost += len(onNode[n])
	}
	err = d.waitFor(d.timings.NodeMonitorGracePeriod+herdTolerationSeconds*time.Second+60*time.Second, func() (bool, string, error) {
		for i := range f.Nodes {
			hn := &f.Nodes[i]
			node, _, _, err := d.st.Nodes.Get(d.ctx, hn.Name)
			if err != nil {
				return false, "", err
			}
			if nodeCondition(node, api.NodeReady) == object.ConditionUnknown {
				mark(&hn.Detected, "status", "node %s Ready=Unknown", hn.Name)
			}
			for _, t := range node.Spec.Taints {
				// The taint's timeAdded, not when a poll first saw it: a
				// poll of many pods may take longer than the rate's period.
				if t.Effect == api.TaintNoExecute && hn.Tainted == 0 {
					hn.Tainted = t.TimeAdded.Sub(t0)
					d.logf("taint", "node %s tainted %s:%s, added %v after the kill", hn.Name, t.Key, t.Effect, hn.Tainted.Round(time.Millisecond))
				}
			}
		}
		pods, err := d.appPods(herdName)
		if err != nil {
			return false, "", err
		}
		fresh, running := 0, 0
		for name, p := range pods {
			if _, old := before[name]; !old {
				fresh++
				if d.podRunning(p) {
					running++
				}
			}
		}
		created, deleted := watch.counts()
		done := len(pods) == herdReplicas && fresh == lost && running == lost && created == lost && deleted == lost
		if done {
			f.Replacements = map[string]int{}
			for name, p := range pods {
				if _, old := before[name]; !old {
					f.Replacements[p.Spec.NodeName]++
				}
			}
			mark(&f.Running, "ok", "%d replacements Running and Ready (%s)", running, perNode(f.Replacements))
		}
		return done, fmt.Sprintf("%d pods, %d replacements, %d running", len(pods), fresh, running), nil
	})
	if err != nil {
		return err
	}
	// The watch tells when each eviction and creation was written, to the
	// millisecond; the poll above only that it had happened.
	watch.close()
	for i := range f.Nodes {
		hn := &f.Nodes[i]
		first, last, n := watch.deletedSpan(onNode[hn.Name])
		if n != hn.Pods {
			return fmt.Errorf("the watch saw %d of %s's %d pods deleted", n, hn.Name, hn.Pods)
		}
		hn.FirstEvicted, hn.Evicted = first.Sub(t0), last.Sub(t0)
		d.logf("evict", "%s's %d pods deleted from %v to %v after the kill (tainted at %v, tolerated for %ds)", hn.Name, hn.Pods,
			hn.FirstEvicted.Round(time.Millisecond), hn.Evicted.Round(time.Millisecond), hn.Tainted.Round(time.Millisecond), herdTolerationSeconds)
	}
	f.Waves = waves(watch.createdTimes(), t0)
	for _, w := range f.Waves {
		d.logf("pods", "%d replacements created within %v, from %v after the kill (slow-start batches %v, if in one sync)", w.Created,
			w.Span.Round(100*time.Microsecond), w.At.Round(time.Millisecond), w.Batches)
	}
	f.TaintGap = (f.Nodes[1].Tainted - f.Nodes[0].Tainted).Abs()
	d.logf("ok", "the two taints %v apart (eviction rate %g node/s); %d pods replaced in %v",
		f.TaintGap.Round(time.Millisecond), f.EvictionRate, lost, f.Running.Round(time.Millisecond))
	d.rep.Herd = &f
	for _, n := range victims {
		if f.Replacements[n] > 0 {
			return fmt.Errorf("replacements on the dead node %s: %v", n, f.Replacements)
		}
	}
	// A token bucket of burst 1 lets the second node's taint through one
	// period after the first at the earliest.
	if period := time.Duration(float64(time.Second) / f.EvictionRate); f.TaintGap < period*9/10 {
		return fmt.Errorf("the two nodes were tainted %v apart, faster than the eviction rate of %g a second", f.TaintGap, f.EvictionRate)
	}
	return nil
}

// waves groups creation times, in order, into waves where 250 ms or more
// pass without one, each timed from t0.
func waves(times []time.Time, t0 time.Time) []HerdWave {
	var ws []HerdWave
	for i, t := range times {
		if i == 0 || t.Sub(times[i-1]) >= 250*time.Millisecond {
			ws = append(ws, HerdWave{At: t.Sub(t0)})
		}
		w := &ws[len(ws)-1]
		w.Created++
		w.Span = t.Sub(t0) - w.At
	}
	for i := range ws {
		ws[i].Batches = slowStartBatches(ws[i].Created)
	}
	return ws
}

// slowStartBatches are the batch sizes the replicaset controller's slow
// start (1, 2, 4, …) gives for n creates that all succeed.
func slowStartBatches(n int) []int {
	var bs []int
	for b := 1; n > 0; b *= 2 {
		bs = append(bs, min(b, n))
		n -= min(b, n)
	}
	return bs
}

// orphanScene runs a small Deployment and deletes it with
// --cascade=orphan.
func (d *demo) orphanScene() error {
	const name, replicas = "cache", 2
	created, err := d.createDeployment(deploymentManifest(name, replicas, ""))
	if err != nil {
		return err
	}
	pods, err := d.appRunning(name, replicas, 30*time.Second)
	if err != nil {
		return err
	}
	d.logf("ok", "deployment.apps/%s: %d pods Running, %v after the apply (%s)", name, replicas,
		time.Since(created).Round(time.Millisecond), strings.Join(slices.Sorted(maps.Keys(pods)), ", "))
	return d.orphanDelete(name)
}
