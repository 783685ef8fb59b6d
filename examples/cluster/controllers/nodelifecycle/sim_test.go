package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/scheduler"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// simTimings are Kubernetes' own: grace 50 s, checks every 5 s, 0.1 nodes
// a second, 300 s of default toleration; virtual time makes them cheap.
var simTimings = api.KubeTimings()

// simWorld is the cluster under the simulation kit: the stores, written by
// the workload as the node agents and users would. An agent that is alive
// has renewed its lease until the far future (so the simulation needs no
// heartbeat); a dead one's lease stopped when it died.
type simWorld struct {
	nodes  *memstore.Store[string, api.Node]
	leases *memstore.Store[string, api.Lease]
	pods   *memstore.Store[string, api.Pod]

	mu   sync.Mutex
	webs []string // the pods a stand-in ReplicaSet keeps; guarded by mu
}

// webPod is a pod of the stand-in ReplicaSet: unbound, owned.
func webPod(name, uid string) api.Pod {
	p := simPod(name, "", "500m")
	p.UID = uid
	p.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: true}}
	return p
}

// replicas stands in for the replicaset controller, which is not under
// test here: a web pod that is gone (evicted) is created again, unbound,
// as a replacement would be. A scheduler may bind a pod to a node it
// still sees Ready a moment after the node was lost (its cache lags the
// store); the pod is then evicted and replaced, as in Kubernetes.
func (w *simWorld) replicas(p *simtest.Process, pods informer.Store[string, api.Pod]) reconcile.Reconciler[string] {
	seq := 0 // one worker
	return reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		w.mu.Lock()
		wanted := slices.Contains(w.webs, key)
		w.mu.Unlock()
		if !wanted {
			return reconcile.Result{}, nil
		}
		_, _, ok, err := pods.Get(ctx, key)
		if err != nil || ok {
			return reconcile.Result{}, err
		}
		seq++
		_, name := api.SplitKey(key)
		_, err = pods.Create(ctx, key, webPod(name, fmt.Sprintf("uid-%s-%d-%d", name, p.Incarnation(), seq)))
		if errors.Is(err, informer.ErrConflict) {
			return reconcile.Result{}, nil // someone created it meanwhile
		}
		return reconcile.Result{}, err
	})
}

func newSimWorld() *simWorld {
	return &simWorld{nodes: must.Do(memstore.New[string, api.Node]()), leases: must.Do(memstore.New[string, api.Lease]()),
		pods: must.Do(memstore.New[string, api.Pod]())}
}

// forever is an alive agent's lease renewal.
var forever = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// simProcess is one incarnation of the control plane's node controllers:
// the scheduler, node lifecycle and taint eviction, on the kit's stores.
func simProcess(p *simtest.Process, w *simWorld) error {
	st := api.Stores{
		Nodes:  simtest.Wrap(p, "nodes", w.nodes),
		Leases: simtest.Wrap(p, "leases", w.leases),
		Pods:   simtest.Wrap(p, "pods", w.pods),
	}
	inf := api.Informers{
		Nodes:  must.Do(informer.New("nodes", st.Nodes)),
		Leases: must.Do(informer.New("leases", st.Leases)),
		Pods:   must.Do(informer.New("pods", st.Pods)),
	}
	c := &api.Cluster{
		Stores: st, Informers: inf, Timings: simTimings,
		// The real clock is the bubble's virtual one; the kit's process
		// clock has no AfterFunc, and no fault here needs it frozen.
		Clock: clock.RealClock{},
		Recorder: func(source string) *events.Recorder {
			return must.Do(events.NewRecorder(source, events.WithSink(must.Do(events.NewMemorySink(0)))))
		},
		Logger: p.Logger(),
	}
	sched, err := scheduler.New(c, scheduler.Options{Wrap: func(r reconcile.Reconciler[string]) reconcile.Reconciler[string] {
		return simtest.Count(p, scheduler.Name, r)
	}})
	if err != nil {
		return err
	}
	ctrls, err := New(c, Options{Wrap: func(name string, r reconcile.Reconciler[string]) reconcile.Reconciler[string] {
		return simtest.Count(p, name, r)
	}})
	if err != nil {
		return err
	}
	p.Go("nodes informer", inf.Nodes.Run)
	p.Go("leases informer", inf.Leases.Run)
	p.Go("pods informer", inf.Pods.Run)
	rs, err := reconcile.New("replicas", simtest.Count(p, "replicas", w.replicas(p, st.Pods)),
		reconcile.For(inf.Pods), reconcile.WithHeadBarrier(), reconcile.WithLogger(p.Logger()))
	if err != nil {
		return err
	}
	p.Add(rs)
	p.Add(sched)
	for _, ctrl := range ctrls {
		p.Add(ctrl)
	}
	return nil
}

func simNode(name string) api.Node {
	var n api.Node
	n.Name, n.CreationTimestamp = name, time.Now().UTC()
	n.Status.Allocatable = api.ResourceList{api.ResourceCPU: "2", api.ResourceMemory: "4Gi", api.ResourcePods: "4"}
	n.Status.Conditions = []object.Condition{{Type: api.NodeReady, Status: object.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: time.Now().UTC()}}
	return n
}

func simPod(name, node, cpu string, tolerations ...api.Toleration) api.Pod {
	var p api.Pod
	p.Name, p.Namespace, p.UID = name, "default", "uid-"+name
	p.Spec.NodeName = node
	p.Spec.Tolerations = tolerations
	p.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker"},
		Resources: api.ResourceRequirements{Requests: api.ResourceList{api.ResourceCPU: api.Quantity(cpu)}}}}
	if node != "" {
		p.Status.Phase = api.PodRunning
		p.Status.Conditions = []object.Condition{{Type: api.PodReady, Status: object.ConditionTrue, Reason: "ContainersReady"}}
	}
	return p
}

func (w *simWorld) renew(ctx context.Context, node string, until time.Time) error {
	key := api.Key(api.NodeLeaseNamespace, node)
	_, _, err := informer.CreateOrUpdate(ctx, w.leases, key, func(l *api.Lease) error {
		l.Name, l.Namespace, l.Spec.HolderIdentity, l.Spec.RenewTime = node, api.NodeLeaseNamespace, node, until
		return nil
	})
	return err
}

func unreachableFor(s *int64) api.Toleration {
	return api.Toleration{Key: api.TaintNodeUnreachable, Operator: api.TolerationOpExists, Effect: api.TaintNoExecute, TolerationSeconds: s}
}

// simWorkload: three nodes with pods pinned to n2; n2's agent dies; once
// it is seen lost, new pods come and must go elsewhere; once its pods
// whose toleration ran out are gone, the agent comes back.
var simWorkload = []func(context.Context, *simWorld) error{
	func(ctx context.Context, w *simWorld) error {
		for _, n := range []string{"n1", "n2", "n3"} {
			if _, err := w.nodes.Create(ctx, n, simNode(n)); err != nil {
				return err
			}
			if err := w.renew(ctx, n, forever); err != nil {
				return err
			}
		}
		for _, p := range []api.Pod{
			simPod("short", "n2", "100m", unreachableFor(seconds(30))),
			simPod("default", "n2", "100m"),
			simPod("keeper", "n2", "100m", unreachableFor(nil)),
			simPod("huge", "", "16"),
		} {
			if _, err := w.pods.Create(ctx, p.Key(), p); err != nil {
				return err
			}
		}
		return nil
	},
	func(ctx context.Context, w *simWorld) error {
		return w.renew(ctx, "n2", time.Now().UTC()) // kill -9 of n2's agent
	},
	func(ctx context.Context, w *simWorld) error {
		if err := simtest.Await(ctx, func() error { return nodeReadyIs(ctx, w, "n2", object.ConditionUnknown) }); err != nil {
			return err
		}
		for _, name := range []string{"web-a", "web-b", "web-c"} {
			p := webPod(name, "uid-"+name)
			w.mu.Lock()
			w.webs = append(w.webs, p.Key())
			w.mu.Unlock()
			if _, err := w.pods.Create(ctx, p.Key(), p); err != nil {
				return err
			}
		}
		return nil
	},
	func(ctx context.Context, w *simWorld) error {
		err := simtest.Await(ctx, func() error {
			for _, name := range []string{"short", "default"} {
				if _, _, ok, err := w.pods.Get(ctx, api.Key("default", name)); err != nil || ok {
					return fmt.Errorf("pod %s is still there (%v)", name, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		return w.renew(ctx, "n2", forever) // the agent is back
	},
}

func nodeReadyIs(ctx context.Context, w *simWorld, name string, want object.ConditionStatus) error {
	n, _, ok, err := w.nodes.Get(ctx, name)
	if err != nil || !ok {
		return fmt.Errorf("node %s: %v", name, err)
	}
	if got := readyStatus(n); got != want {
		return fmt.Errorf("node %s is Ready=%s, not %s", name, got, want)
	}
	return nil
}

// simState is what must end as in the fault-free run: each node's Ready
// status and taints (without times), each pod's phase of scheduling
// (pinned pods by node, scheduled pods by whether their node is Ready,
// since which equal node a pod lands on may differ).
type simState struct {
	Nodes map[string]string
	Pods  map[string]string
}

func observeSim(w *simWorld) any {
	ctx := context.Background()
	out := simState{Nodes: map[string]string{}, Pods: map[string]string{}}
	nodes, _, _ := w.nodes.List(ctx)
	ready := map[string]bool{}
	for _, e := range nodes {
		var taints []string
		for _, t := range e.Value.Spec.Taints {
			taints = append(taints, t.Key+":"+t.Effect)
		}
		slices.Sort(taints)
		out.Nodes[e.Key] = fmt.Sprintf("Ready=%s %v", readyStatus(e.Value), taints)
		ready[e.Key] = readyStatus(e.Value) == object.ConditionTrue
	}
	pods, _, _ := w.pods.List(ctx)
	for _, e := range pods {
		p := e.Value
		c, _ := object.FindCondition(p.Status.Conditions, api.PodScheduled)
		switch {
		case p.Spec.NodeName == "":
			out.Pods[e.Key] = "unbound " + c.Reason + ": " + c.Message
		case strings.HasPrefix(p.Name, "web-"):
			out.Pods[e.Key] = fmt.Sprintf("scheduled, node ready=%v", ready[p.Spec.NodeName])
		default:
			out.Pods[e.Key] = "pinned to " + p.Spec.NodeName
		}
	}
	return out
}

// noPodOnALongLostNode is the cluster's eviction oracle: no pod stays bound to a node
// whose lease expired longer than the grace period plus the pod's
// toleration ago. The detection may lag the expiry by one check, the taint
// wait its turn in the zone's queue (one interval per node), and a stale
// restart see the lease late.
func noPodOnALongLostNode(w *simWorld) error {
	ctx := context.Background()
	now := time.Now()
	nodes, _, _ := w.nodes.List(ctx)
	slack := simTimings.NodeMonitorPeriod + time.Duration(float64(len(nodes))/simTimings.NodeEvictionRate*float64(time.Second)) + 10*time.Second
	pods, _, _ := w.pods.List(ctx)
	for _, e := range pods {
		p := e.Value
		if p.Spec.NodeName == "" {
			continue
		}
		lease, _, ok, _ := w.leases.Get(ctx, api.Key(api.NodeLeaseNamespace, p.Spec.NodeName))
		if !ok {
			continue
		}
		tol, ok := api.TolerationFor(withDefaultTolerations(p.Spec.Tolerations, simTimings.DefaultTolerationSeconds),
			api.Taint{Key: api.TaintNodeUnreachable, Effect: api.TaintNoExecute})
		if ok && tol.TolerationSeconds == nil {
			continue
		}
		var toleration time.Duration
		if ok {
			toleration = time.Duration(*tol.TolerationSeconds) * time.Second
		}
		expired := lease.Spec.RenewTime.Add(simTimings.NodeMonitorGracePeriod)
		if limit := expired.Add(toleration + slack); now.After(limit) {
			return fmt.Errorf("pod %s is still bound to %s, whose lease expired at %v, %v ago (toleration %v)",
				e.Key, p.Spec.NodeName, expired, now.Sub(expired), toleration)
		}
	}
	return nil
}

// noNodeOverCommitted: the pods bound to a node never ask for more than it
// has, also while a restarted scheduler rebuilds what it assumed.
func noNodeOverCommitted(w *simWorld) error {
	ctx := context.Background()
	pods, _, _ := w.pods.List(ctx)
	count := map[string]int{}
	cpu := map[string]int64{}
	for _, e := range pods {
		if n := e.Value.Spec.NodeName; n != "" {
			count[n]++
			m, _ := e.Value.Spec.Containers[0].Resources.Requests[api.ResourceCPU].Milli()
			cpu[n] += m
		}
	}
	for n := range count {
		if count[n] > 4 || cpu[n] > 2000 {
			return fmt.Errorf("node %s holds %d pods asking for %dm cpu: more than it has", n, count[n], cpu[n])
		}
	}
	return nil
}

// convergedPlacement: once converged, every pod but the one no node fits is
// bound to a Ready node, and that one says why it is not.
func convergedPlacement(w *simWorld) error {
	ctx := context.Background()
	pods, _, _ := w.pods.List(ctx)
	var errs []error
	for _, e := range pods {
		p := e.Value
		if p.Name == "huge" {
			c, _ := object.FindCondition(p.Status.Conditions, api.PodScheduled)
			if p.Spec.NodeName != "" || c.Reason != api.ReasonUnschedulable {
				errs = append(errs, fmt.Errorf("huge: node %q, PodScheduled %s %s", p.Spec.NodeName, c.Status, c.Reason))
			}
			continue
		}
		if err := nodeReadyIs(ctx, w, p.Spec.NodeName, object.ConditionTrue); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", e.Key, err))
		}
	}
	return errors.Join(errs...)
}

func simSpec(mode simtest.Mode, runs int, kinds ...simtest.Kind) simtest.Spec[*simWorld] {
	return simtest.Spec[*simWorld]{
		World:      newSimWorld,
		Process:    simProcess,
		Workload:   simWorkload,
		Observe:    observeSim,
		Invariants: []func(*simWorld) error{noPodOnALongLostNode, noNodeOverCommitted},
		Converged:  []func(*simWorld) error{convergedPlacement},
		Mode:       mode,
		Runs:       runs,
		Kinds:      kinds,
		Seed:       1,
		// The lifecycle controller looks at the nodes every monitor period
		// without writing, and the pod no node fits is retried at the
		// scheduler's longest back-off.
		Periodic: map[string]time.Duration{
			LifecycleName + "/" + monitorKey: simTimings.NodeMonitorPeriod,
			scheduler.Name + "/default/huge": simTimings.SchedulerBackOffMax,
		},
		// Longer than a monitor period: a change the next check makes is
		// not "after it converged".
		Idle:  2 * simTimings.NodeMonitorPeriod,
		Quiet: 2 * time.Minute,
		// A restarted scheduler retries the pod no node fits from the
		// shortest back-off again (1, 2, 4, 8 s: kube-scheduler's back-off
		// too lives in its memory), a few reconciles beyond the period.
		MaxReconcilesPerKey: 6,
	}
}

func TestTheNodeControllersShouldSurviveACrashAfterEveryWrite(t *testing.T) {
	r := simtest.Run(t, simSpec(simtest.Exhaustive, 0))
	assert.Greater(t, r.Writes, 10, "the workload makes the controllers write")
	assert.Equal(t, r.Writes, r.Schedules, "one schedule per write")
}

func TestTheNodeControllersShouldPassSampledFaultSchedules(t *testing.T) {
	r := simtest.Run(t, simSpec(simtest.Sampled, 100, simtest.DefaultKinds...))
	assert.GreaterOrEqual(t, r.Schedules, 100, "-simtest.runs may ask for more")
}

func TestTheLostNodeOracleShouldCatchAPodLeftOnALongLostNode(t *testing.T) {
	ctx := context.Background()
	w := newSimWorld()
	_, err := w.pods.Create(ctx, "default/p", simPod("p", "n1", "100m", unreachableFor(seconds(30))))
	assert.NoError(t, err)
	assert.NoError(t, w.renew(ctx, "n1", time.Now()))
	assert.NoError(t, noPodOnALongLostNode(w), "a fresh lease")
	assert.NoError(t, w.renew(ctx, "n1", time.Now().Add(-simTimings.NodeMonitorGracePeriod-30*time.Second)))
	assert.NoError(t, noPodOnALongLostNode(w), "grace and toleration just passed: within the slack")
	assert.NoError(t, w.renew(ctx, "n1", time.Now().Add(-time.Hour)))
	assert.ErrorContains(t, noPodOnALongLostNode(w), "pod default/p is still bound to n1")
}
