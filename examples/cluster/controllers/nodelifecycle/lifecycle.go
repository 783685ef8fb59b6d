// Package nodelifecycle is the cluster example's node lifecycle
// controller, taint eviction controller and pod garbage collection, as
// kube-controller-manager runs them
// (k8s@v1.37.2:pkg/controller/nodelifecycle/node_lifecycle_controller.go,
// k8s@v1.37.2:pkg/controller/tainteviction/taint_eviction.go,
// k8s@v1.37.2:pkg/controller/podgc/gc_controller.go).
//
// The node lifecycle controller checks every Timings.NodeMonitorPeriod
// when each node's Lease (kube-node-lease/<node>) was last renewed. A node
// whose lease is older than NodeMonitorGracePeriod (NodeStartupGracePeriod
// for a node that never reported) becomes Ready=Unknown (reason
// NodeStatusUnknown, event NodeNotReady) and gets the unreachable
// NoSchedule taint at once, and the unreachable NoExecute taint through
// its zone's rate-limited queue: NodeEvictionRate nodes a second while the
// zone (label topology.kubernetes.io/zone) is healthy,
// SecondaryNodeEvictionRate while at least UnhealthyZoneThreshold of its
// nodes, and more than two, are not Ready and it has more than
// LargeClusterSizeThreshold nodes, and none while it is so unhealthy and
// smaller; when every zone has no Ready node at all it taints nothing and
// takes the NoExecute taints off ("full disruption": the controller
// cannot tell a dead cluster from its own lost view of it). A node its
// agent reports Ready=False gets the not-ready taints instead. When the
// lease is renewed again, Ready is restored and the taints go at once.
//
// The taint eviction controller deletes a pod from a node with a
// NoExecute taint it does not tolerate at once, and one it tolerates for
// tolerationSeconds once that long has passed since the taint's
// TimeAdded. A pod without a not-ready or unreachable toleration of its
// own tolerates them for Timings.DefaultTolerationSeconds, as the
// DefaultTolerationSeconds admission plugin would have given it. It marks
// the pods of a node that is not Ready Ready=False, and deletes pods bound
// to a node that no longer exists.
package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// Controller names, and the sources of their events.
const (
	LifecycleName = "node-lifecycle-controller"
	EvictionName  = "taint-eviction-controller"
)

// Event reasons. NodeNotReady, NodeReady (on the node's key) and
// TaintManagerEviction (on the pod's key) are Kubernetes'; Kubernetes'
// pod garbage collector records nothing, this one NodeLost on the pod.
const (
	EventNodeNotReady         = "NodeNotReady"
	EventNodeReady            = "NodeReady"
	EventTaintManagerEviction = "TaintManagerEviction"
	EventPodGarbageCollected  = "NodeLost"
)

// The Ready condition's reasons this controller writes: Unknown with
// Kubernetes' NodeStatusUnknown (a lease no longer renewed) or
// NodeStatusNeverUpdated (a node that never reported), and True with
// NodeLeaseRenewed when the lease is renewed again.
const (
	ReasonNodeStatusUnknown   = "NodeStatusUnknown"
	ReasonNodeStatusNeverSeen = "NodeStatusNeverUpdated"
	ReasonNodeLeaseRenewed    = "NodeLeaseRenewed"

	messageNodeStatusUnknown   = "Kubelet stopped posting node status."
	messageNodeStatusNeverSeen = "Kubelet never posted node status."
)

// monitorKey is the one key of the lifecycle controller: every pass looks
// at all nodes, since a zone's state depends on all of its nodes.
const monitorKey = "nodes"

// Add adds the node lifecycle and taint eviction controllers to m, on c's
// informers and stores.
func Add(m *reconcile.Manager, c *api.Cluster) error {
	ctrls, err := New(c, Options{})
	if err != nil {
		return err
	}
	for _, ctrl := range ctrls {
		if err := m.AddController(ctrl); err != nil {
			return err
		}
	}
	return nil
}

// Options configures New. The zero Options is the default.
type Options struct {
	// Controller options are added to each controller after its own (a
	// test's clock and logger). Default none.
	Controller []reconcile.Option
	// Wrap, if set, wraps each controller's reconciler, given the
	// controller's name: a simulation (reconcile/simtest.Count) counts and
	// orders their reconciles so. Default none.
	Wrap func(controller string, r reconcile.Reconciler[string]) reconcile.Reconciler[string]
}

// New builds the node lifecycle controller and the taint
// eviction controller without adding them to a Manager. It adds
// api.PodNodeNameIndex to the pods informer if missing. c needs its Nodes,
// Leases and Pods informers and stores, timings whose periods and rates
// are positive, and a clock that implements reconcile.Clock (a nil one is
// the real clock).
func New(c *api.Cluster, o Options) ([]*reconcile.Controller[string], error) {
	wrap := o.Wrap
	if wrap == nil {
		wrap = func(_ string, r reconcile.Reconciler[string]) reconcile.Reconciler[string] { return r }
	}
	opts := o.Controller
	if c == nil || c.Informers.Nodes == nil || c.Informers.Leases == nil || c.Informers.Pods == nil ||
		c.Stores.Nodes == nil || c.Stores.Pods == nil {
		return nil, errors.New("nodelifecycle: the cluster needs its nodes, leases and pods informers and the nodes and pods stores")
	}
	if err := checkTimings(c.Timings); err != nil {
		return nil, err
	}
	var clk reconcile.Clock = clock.RealClock{}
	if c.Clock != nil {
		var ok bool
		if clk, ok = c.Clock.(reconcile.Clock); !ok {
			return nil, fmt.Errorf("nodelifecycle: clock %T has no AfterFunc", c.Clock)
		}
	}
	if err := api.AddPodNodeNameIndex(c.Informers.Pods); err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	recorder := func(name string) *events.Recorder {
		if c.Recorder == nil {
			return nil
		}
		return c.Recorder(name)
	}
	// Both controllers act on what their caches say of time: a restarted
	// process whose caches lag its store (an HA API server's replica)
	// would find a renewed lease old, or a node's taint missing. The head
	// barrier holds their workers until the caches hold the store's head
	// (on etcd, with a short --experimental-watch-progress-notify-interval;
	// see reconcile.WithHeadBarrier).
	base := []reconcile.Option{reconcile.WithClock(clk), reconcile.WithHeadBarrier()}
	if c.Logger != nil {
		base = append(base, reconcile.WithLogger(c.Logger))
	}

	l := &lifecycle{
		nodes: c.Informers.Nodes, leases: c.Informers.Leases, store: c.Stores.Nodes,
		clock: clk, events: recorder(LifecycleName), t: c.Timings,
		zones: map[string]*zone{}, firstSeen: map[string]time.Time{},
	}
	lc, err := reconcile.New(LifecycleName, wrap(LifecycleName, reconcile.Func(l.reconcile)), slices.Concat(base, []reconcile.Option{
		reconcile.Watch(l.nodes, func(string, api.Node) []string { return []string{monitorKey} }, nodeHealthInput),
		// A new lease (an agent that registered) is looked at at once;
		// renewals wait for the next periodic check, as in Kubernetes.
		reconcile.Watch(l.leases, func(string, api.Lease) []string { return []string{monitorKey} },
			func(ch reconcile.Change[string, api.Lease]) bool {
				return ch.Kind == reconcile.Added && !ch.InitialList
			}),
	}, opts)...)
	if err != nil {
		return nil, err
	}

	e := &eviction{
		pods: c.Informers.Pods, nodes: c.Informers.Nodes, podStore: c.Stores.Pods, nodeStore: c.Stores.Nodes,
		clock: clk, events: recorder(EvictionName), defaultToleration: c.Timings.DefaultTolerationSeconds,
		firstSeen: map[string]time.Time{},
	}
	ec, err := reconcile.New(EvictionName, wrap(EvictionName, reconcile.Func(e.reconcile)), slices.Concat(base, []reconcile.Option{
		reconcile.For(e.pods, boundPod),
		reconcile.Watch(e.nodes, e.podsOnNode, nodeTaintsOrReadyChanged),
	}, opts)...)
	if err != nil {
		return nil, err
	}
	return []*reconcile.Controller[string]{lc, ec}, nil
}

func checkTimings(t api.Timings) error {
	var bad []string
	for name, d := range map[string]time.Duration{
		"NodeMonitorPeriod": t.NodeMonitorPeriod, "NodeMonitorGracePeriod": t.NodeMonitorGracePeriod,
		"NodeStartupGracePeriod": t.NodeStartupGracePeriod,
	} {
		if d <= 0 {
			bad = append(bad, fmt.Sprintf("%s %v", name, d))
		}
	}
	if t.NodeEvictionRate <= 0 || t.SecondaryNodeEvictionRate < 0 {
		bad = append(bad, fmt.Sprintf("eviction rates %v and %v", t.NodeEvictionRate, t.SecondaryNodeEvictionRate))
	}
	if t.UnhealthyZoneThreshold <= 0 || t.UnhealthyZoneThreshold > 1 {
		bad = append(bad, fmt.Sprintf("UnhealthyZoneThreshold %v", t.UnhealthyZoneThreshold))
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("nodelifecycle: bad timings: %s (want positive periods and eviction rate, a threshold in (0, 1])",
			strings.Join(bad, ", "))
	}
	return nil
}

// nodeHealthInput lets through the node changes a pass must look at soon:
// a node added or deleted, its labels (zone), spec or conditions changed.
func nodeHealthInput(ch reconcile.Change[string, api.Node]) bool {
	if ch.Kind != reconcile.Updated || ch.Resync {
		return true
	}
	o, n := ch.Old, ch.New
	return !maps.Equal(o.Labels, n.Labels) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, sameTaint) ||
		!slices.EqualFunc(o.Status.Conditions, n.Status.Conditions, sameCondition)
}

func sameTaint(a, b api.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect && a.TimeAdded.Equal(b.TimeAdded)
}

func sameCondition(a, b object.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// lifecycle is the node lifecycle controller's state: what Kubernetes keeps
// in memory too (zone states and tainting queues, rebuilt after a restart
// from the nodes).
type lifecycle struct {
	nodes  *informer.Informer[string, api.Node]
	leases *informer.Informer[string, api.Lease]
	store  informer.ReadWriter[string, api.Node]
	clock  clock.PassiveClock
	events *events.Recorder
	t      api.Timings

	// Only the one key's reconcile touches these, one at a time.
	zones     map[string]*zone
	firstSeen map[string]time.Time // nodes without a creation time, when first seen
	// exitedDisruption is when the last full disruption ended: every node
	// gets a fresh grace period from then, as Kubernetes resets its probe
	// timestamps.
	exitedDisruption time.Time
}

func zoneOf(n api.Node) string { return n.Labels[api.LabelTopologyZone] }

func readyStatus(n api.Node) object.ConditionStatus {
	c, ok := object.FindCondition(n.Status.Conditions, api.NodeReady)
	if !ok {
		return ""
	}
	return c.Status
}

// probe is a node's last sign of life and the grace it gets after it:
// the lease's renewal, or for a node that never reported (no renewal, no
// Ready condition) its creation with the startup grace; never before the
// end of the last full disruption. fresh says whether the lease itself
// was renewed within the grace period, which alone restores Ready.
func (l *lifecycle) probe(n api.Node, now time.Time) (last time.Time, grace time.Duration, fresh bool) {
	lease, ok := l.leases.Get(api.Key(api.NodeLeaseNamespace, n.Name))
	renewed := ok && !lease.Spec.RenewTime.IsZero()
	switch {
	case renewed:
		last, grace = lease.Spec.RenewTime, l.t.NodeMonitorGracePeriod
		fresh = !now.After(last.Add(grace))
	case readyStatus(n) == "":
		last, grace = n.CreationTimestamp, l.t.NodeStartupGracePeriod
	default:
		last, grace = n.CreationTimestamp, l.t.NodeMonitorGracePeriod
	}
	if last.IsZero() {
		if _, seen := l.firstSeen[n.Name]; !seen {
			l.firstSeen[n.Name] = now
		}
		last = l.firstSeen[n.Name]
	}
	if last.Before(l.exitedDisruption) {
		last = l.exitedDisruption
	}
	return last, grace, fresh
}

func (l *lifecycle) reconcile(ctx context.Context, _ string) (reconcile.Result, error) {
	now := l.clock.Now()
	entries := l.nodes.List()
	slices.SortFunc(entries, func(a, b informer.Entry[string, api.Node]) int { return strings.Compare(a.Key, b.Key) })

	type counts struct{ ready, notReady int }
	perZone := map[string]*counts{}
	var errs []error
	nodes := make([]api.Node, 0, len(entries))
	for _, e := range entries {
		n, err := l.syncHealth(ctx, e.Value, now)
		if err != nil {
			errs = append(errs, err)
			n = e.Value
		}
		nodes = append(nodes, n)
		zn := zoneOf(n)
		z := l.zones[zn]
		if z == nil {
			z = &zone{state: stateInitial}
			z.setRate(l.t.NodeEvictionRate)
			l.zones[zn] = z
		}
		if perZone[zn] == nil {
			perZone[zn] = &counts{}
		}
		if readyStatus(n) == object.ConditionTrue {
			perZone[zn].ready++
			z.remove(n.Name)
			continue
		}
		perZone[zn].notReady++
		if want := noExecuteKeyFor(n); want != "" && !hasTaint(n.Spec.Taints, want, api.TaintNoExecute) {
			z.enqueue(n.Name)
		}
	}
	for name := range l.zones {
		if perZone[name] == nil {
			delete(l.zones, name)
		}
	}
	for name := range l.firstSeen {
		if _, ok := l.nodes.Get(name); !ok {
			delete(l.firstSeen, name)
		}
	}

	newStates := map[string]zoneState{}
	for name, c := range perZone {
		newStates[name] = computeZoneState(c.ready, c.notReady, l.t.UnhealthyZoneThreshold)
	}
	errs = append(errs, l.handleDisruption(ctx, newStates, perZoneSize(perZone, func(c *counts) int { return c.ready + c.notReady }), nodes, now)...)
	errs = append(errs, l.taintPass(ctx, now)...)

	if len(entries) == 0 {
		return reconcile.Result{}, errors.Join(errs...)
	}
	next := l.t.NodeMonitorPeriod
	for _, z := range l.zones {
		if len(z.queue) == 0 {
			continue
		}
		if w, ok := z.limiter.wait(now); ok && w > 0 && w < next {
			next = w
		}
	}
	return reconcile.Result{RequeueAfter: next}, errors.Join(errs...)
}

func perZoneSize[C any](m map[string]C, size func(C) int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = size(v)
	}
	return out
}

// handleDisruption moves each zone to its new state and sets its eviction
// rate, as Kubernetes' handleDisruption does: entering the state where
// every zone is fully disrupted stops all tainting and takes the NoExecute
// taints off every node; leaving it gives every node a fresh grace period.
func (l *lifecycle) handleDisruption(ctx context.Context, newStates map[string]zoneState, sizes map[string]int, nodes []api.Node, now time.Time) []error {
	allAre := len(newStates) > 0
	for _, s := range newStates {
		if s != stateFullDisruption {
			allAre = false
		}
	}
	allWere := len(l.zones) > 0
	for _, z := range l.zones {
		if z.state != stateFullDisruption {
			allWere = false
		}
	}
	var errs []error
	switch {
	case allAre && allWere:
		return nil
	case allAre:
		reconcile.LoggerFrom(ctx).Info("every node is not Ready: entering full disruption, no taints, no evictions")
		for _, n := range nodes {
			if err := l.removeNoExecuteTaints(ctx, n.Name); err != nil {
				errs = append(errs, err)
			}
		}
		for _, z := range l.zones {
			z.setRate(0)
			z.state = stateFullDisruption
			z.queue = nil
		}
		return errs
	case allWere:
		reconcile.LoggerFrom(ctx).Info("some nodes are Ready: leaving full disruption")
		l.exitedDisruption = now
		for name, z := range l.zones {
			z.state = newStates[name]
			z.setRate(l.rateFor(z.state, sizes[name]))
		}
		return nil
	}
	for name, z := range l.zones {
		if s := newStates[name]; s != z.state {
			reconcile.LoggerFrom(ctx).Info("zone changed state", "zone", name, "from", z.state, "to", s)
			z.state = s
			z.setRate(l.rateFor(s, sizes[name]))
		}
	}
	return nil
}

// rateFor is a zone's eviction rate in a state (Kubernetes' HealthyQPSFunc
// and ReducedQPSFunc): the primary rate unless partially disrupted, then
// the secondary one in a zone larger than LargeClusterSizeThreshold, else
// none.
func (l *lifecycle) rateFor(s zoneState, size int) float64 {
	if s != statePartialDisruption {
		return l.t.NodeEvictionRate
	}
	if size > l.t.LargeClusterSizeThreshold {
		return l.t.SecondaryNodeEvictionRate
	}
	return 0
}

// taintPass gives the NoExecute taint to the nodes at the head of each
// zone's queue while the zone's limiter has tokens (Kubernetes'
// doNoExecuteTaintingPass).
func (l *lifecycle) taintPass(ctx context.Context, now time.Time) []error {
	names := make([]string, 0, len(l.zones))
	for name := range l.zones {
		names = append(names, name)
	}
	slices.Sort(names)
	var errs []error
	for _, name := range names {
		z := l.zones[name]
		for len(z.queue) > 0 && z.limiter.take(now) {
			node := z.queue[0]
			z.queue = z.queue[1:]
			if err := l.addNoExecuteTaint(ctx, node, now); err != nil {
				errs = append(errs, err)
				z.enqueue(node)
			}
		}
	}
	return errs
}
