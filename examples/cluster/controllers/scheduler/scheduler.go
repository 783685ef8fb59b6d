// Package scheduler is the cluster example's kube-scheduler: it binds each
// pod without a node to a node that fits it, as Kubernetes' default
// profile does with the plugins a cluster without volumes or affinity
// needs (k8s@v1.37.2:pkg/scheduler/schedule_one.go, and the plugin files
// each rule cites).
//
// A scheduling cycle filters the nodes (NodeName, NodeUnschedulable,
// TaintToleration with a not-Ready node treated as tainted, NodePorts,
// NodeResourcesFit), scores the feasible ones (TaintToleration,
// PodTopologySpread's default spreading of an owner's pods,
// NodeResourcesFit's LeastAllocated, BalancedAllocation, with the default
// weights) and binds the pod to the best: one compare-and-swap write that
// sets only Spec.NodeName and the PodScheduled condition. A pod no node
// fits gets PodScheduled=False (reason Unschedulable, Kubernetes' message),
// a FailedScheduling event, and a retry after a back-off doubling from
// Timings.SchedulerBackOff to SchedulerBackOffMax, or at once when a node
// is added or changes in a way that may let it fit, or a bound pod goes.
//
// The scheduler keeps a cache of every node's totals (pods, requests,
// host ports, pods per owner), updated change by change from the pods and
// nodes informers, as kube-scheduler's cache is
// (k8s@v1.37.2:pkg/scheduler/backend/cache): a cycle costs O(nodes), not
// O(pods). A cycle first waits until the cache has been given every change
// the informers held when it began, so a pod deleted, ended or moved has
// freed its node for the very next cycle. The scheduler assumes a pod on
// its node from the moment it decides (AssumePod there), so that the next
// pod is scheduled against the resources the first took, also before the
// pods informer has seen the bind; the assumption gives way to the bound
// pod when the informer shows it, or is dropped if the bind fails.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// Name is the controller's name and the source of its events, as
// Kubernetes names its scheduler.
const Name = "default-scheduler"

// Event reasons.
const (
	EventScheduled        = "Scheduled"
	EventFailedScheduling = "FailedScheduling"
)

// Options configures New. The zero Options is the default.
type Options struct {
	// Seed picks among nodes of equal score (see pickNode): the same seed
	// binds the same pods to the same nodes. Default 0.
	Seed uint64
	// Controller options are added after the scheduler's own (a test's
	// clock and logger). Default none.
	Controller []reconcile.Option
	// Wrap, if set, wraps the scheduler's reconciler: a simulation
	// (reconcile/simtest.Count) counts and orders its reconciles so.
	// Default none.
	Wrap func(reconcile.Reconciler[string]) reconcile.Reconciler[string]
}

// Add adds the scheduler to m, on c's informers and stores.
func Add(m *reconcile.Manager, c *api.Cluster) error {
	ctrl, err := New(c, Options{})
	if err != nil {
		return err
	}
	return m.AddController(ctrl)
}

// New builds the scheduler's controller without adding it to a
// Manager. c must have its Pods and Nodes informers and stores, and a
// clock that also implements reconcile.Clock (k8s.io/utils/clock's real
// and fake clocks do); a nil c.Clock is the real clock.
//
// New adds the handlers that keep the scheduler's node cache to the pods
// and nodes informers at once, so it fails on informers that have
// stopped. They stay for the informers' lifetime, across the
// controller's runs, as the cache does; a controller that is never run
// still keeps its cache up to date.
func New(c *api.Cluster, opts Options) (*reconcile.Controller[string], error) {
	if c == nil || c.Informers.Pods == nil || c.Informers.Nodes == nil || c.Stores.Pods == nil {
		return nil, errors.New("scheduler: the cluster needs its pods and nodes informers and the pods store")
	}
	var clk reconcile.Clock = clock.RealClock{}
	if c.Clock != nil {
		var ok bool
		if clk, ok = c.Clock.(reconcile.Clock); !ok {
			return nil, fmt.Errorf("scheduler: clock %T has no AfterFunc", c.Clock)
		}
	}
	t := c.Timings
	if t.SchedulerBackOff <= 0 || t.SchedulerBackOffMax < t.SchedulerBackOff {
		return nil, fmt.Errorf("scheduler: back-off %v to %v: want 0 < SchedulerBackOff <= SchedulerBackOffMax",
			t.SchedulerBackOff, t.SchedulerBackOffMax)
	}
	s := &scheduler{
		pods: c.Informers.Pods, nodes: c.Informers.Nodes, store: c.Stores.Pods,
		clock: clk, seed: opts.Seed, backOff: t.SchedulerBackOff, backOffMax: t.SchedulerBackOffMax,
		attempts: map[string]int{},
	}
	if err := s.watchCache(); err != nil {
		return nil, err
	}
	if c.Recorder != nil {
		s.events = c.Recorder(Name)
	}
	ro := []reconcile.Option{
		reconcile.WithClock(clk),
		// A restarted scheduler whose caches lag its store would bind to a
		// node it still sees Ready and free: the head barrier holds it
		// until its caches hold the store's head (on etcd, with a short
		// --experimental-watch-progress-notify-interval; see
		// reconcile.WithHeadBarrier).
		reconcile.WithHeadBarrier(),
		reconcile.For(s.pods, s.podChanged),
		reconcile.Watch(s.nodes, func(string, api.Node) []string { return s.waitingKeys() }, nodeChangeMayHelp),
		reconcile.Watch(s.pods, func(string, api.Pod) []string { return s.waitingKeys() }, podReleasedResources),
	}
	if c.Logger != nil {
		ro = append(ro, reconcile.WithLogger(c.Logger))
	}
	var rec reconcile.Reconciler[string] = reconcile.Func(s.reconcile)
	if opts.Wrap != nil {
		rec = opts.Wrap(rec)
	}
	ctrl, err := reconcile.New(Name, rec, append(ro, opts.Controller...)...)
	if err != nil {
		s.unwatchCache()
		return nil, err
	}
	return ctrl, nil
}

type scheduler struct {
	pods   *informer.Informer[string, api.Pod]
	nodes  *informer.Informer[string, api.Node]
	store  informer.ReadWriter[string, api.Pod]
	clock  clock.PassiveClock
	events *events.Recorder
	seed   uint64

	backOff, backOffMax time.Duration

	// The cache's handlers on the informers.
	podReg  *informer.Registration[string, api.Pod]
	nodeReg *informer.Registration[string, api.Node]

	// mu makes a scheduling cycle, from reading the nodes to assuming the
	// pod, one step, as kube-scheduler schedules one pod at a time.
	mu       sync.Mutex
	cache    *nodeCache     // guarded by mu
	attempts map[string]int // failed cycles in a row, by the key of a pod waiting to fit; guarded by mu
}

// podChanged lets through the changes that matter to a pod's scheduling:
// an unbound pod added, its spec or deletion changed, its bind, its
// deletion. A status write (the scheduler's own PodScheduled=False) does
// not, or every unschedulable pod would be retried at once by its own
// write.
func (s *scheduler) podChanged(ch reconcile.Change[string, api.Pod]) bool {
	switch ch.Kind {
	case reconcile.Added:
		return ch.New.Spec.NodeName == ""
	case reconcile.Deleted:
		return true
	}
	if ch.Resync {
		return ch.New.Spec.NodeName == ""
	}
	if ch.Old.Spec.NodeName != "" {
		return false
	}
	return !reflect.DeepEqual(ch.Old.Spec, ch.New.Spec) || !ch.Old.DeletionRequested.Equal(ch.New.DeletionRequested)
}

// nodeChangeMayHelp lets through the node changes after which a pod that
// did not fit may fit: a node added, or its spec, labels, allocatable or
// Ready condition changed (kube-scheduler's queueing hints for Node
// events, k8s@v1.37.2:pkg/scheduler/framework/types.go NodeAdd and the
// node update event types).
func nodeChangeMayHelp(ch reconcile.Change[string, api.Node]) bool {
	switch ch.Kind {
	case reconcile.Added:
		return true
	case reconcile.Deleted:
		return false
	}
	o, n := ch.Old, ch.New
	return !reflect.DeepEqual(o.Spec, n.Spec) || !reflect.DeepEqual(o.Labels, n.Labels) ||
		!reflect.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
		object.IsTrue(o.Status.Conditions, api.NodeReady) != object.IsTrue(n.Status.Conditions, api.NodeReady)
}

// podReleasedResources lets through a bound pod's deletion or its end
// (Succeeded, Failed): what it held is free again.
func podReleasedResources(ch reconcile.Change[string, api.Pod]) bool {
	switch ch.Kind {
	case reconcile.Deleted:
		return ch.Old.Spec.NodeName != ""
	case reconcile.Updated:
		return ch.New.Spec.NodeName != "" && !holdsResources(ch.New) && holdsResources(ch.Old)
	}
	return false
}

// holdsResources: a pod that has ended no longer counts on its node.
func holdsResources(p api.Pod) bool {
	return p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed
}

// waitingKeys returns the keys of the pods waiting for a change that may
// let them fit: they are retried now, not at the end of their back-off.
func (s *scheduler) waitingKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.attempts))
	for k := range s.attempts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *scheduler) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	pod, ok := s.pods.Get(key)
	if !ok || pod.Spec.NodeName != "" || pod.Deleting() {
		s.forget(key)
		return reconcile.Result{}, nil
	}
	pi, err := newPodInfo(pod)
	if err != nil {
		s.forget(key)
		s.events.Eventf(ctx, key, events.Warning, EventFailedScheduling, "invalid resource requests: %v", err)
		return reconcile.Result{}, reconcile.Terminal(err)
	}

	if err := s.cacheCaughtUp(ctx); err != nil {
		return reconcile.Result{}, err
	}
	s.mu.Lock()
	if s.cache.counted(key, pod.UID) {
		// Bound (or being bound) by an earlier cycle; the informer will
		// reconcile the key when it shows the bind, if it has not yet.
		s.mu.Unlock()
		return reconcile.Result{}, nil
	}
	nodes := s.cache.list()
	feasible, reasons := filterNodes(&pi, nodes)
	if len(feasible) == 0 {
		s.attempts[key]++
		delay := s.backOffFor(s.attempts[key])
		s.mu.Unlock()
		return reconcile.Result{RequeueAfter: delay}, s.unschedulable(ctx, key, pod.UID, unschedulableMessage(len(nodes), reasons))
	}
	best := feasible[pickNode(scoreNodes(&pi, feasible), s.seed, key, pod.UID)]
	node := best.node.Name
	s.cache.assume(key, node, pi)
	s.mu.Unlock()

	rev, err := s.bind(ctx, key, pod.UID, node)
	if err != nil {
		s.mu.Lock()
		s.cache.forget(key, pod.UID)
		s.mu.Unlock()
		if errors.Is(err, errGone) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("bind %s to %s: %w", key, node, err)
	}
	s.mu.Lock()
	delete(s.attempts, key)
	s.mu.Unlock()
	reconcile.Wrote(ctx, s.pods, rev)
	s.events.Eventf(ctx, key, events.Normal, EventScheduled, "Successfully assigned %s to %s", key, node)
	return reconcile.Result{}, nil
}

// forget drops the back-off of a pod that is bound, gone or deleting.
// What the cache counts of it follows the informer's changes.
func (s *scheduler) forget(key string) {
	s.mu.Lock()
	delete(s.attempts, key)
	s.mu.Unlock()
}

// backOffFor is the delay after the n-th failed cycle in a row:
// SchedulerBackOff doubled n-1 times, at most SchedulerBackOffMax
// (k8s@v1.37.2:pkg/scheduler/backend/queue/scheduling_queue.go
// calculateBackoffDuration).
func (s *scheduler) backOffFor(n int) time.Duration {
	d := s.backOff
	for i := 1; i < n && d < s.backOffMax; i++ {
		d *= 2
	}
	return min(d, s.backOffMax)
}

// filterNodes returns the nodes that fit p, and how many nodes gave each
// reason for not fitting.
func filterNodes(p *podInfo, nodes []*nodeInfo) ([]*nodeInfo, map[string]int) {
	var feasible []*nodeInfo
	reasons := map[string]int{}
	for _, n := range nodes {
		r := runFilters(p, n)
		if len(r) == 0 {
			feasible = append(feasible, n)
			continue
		}
		for _, x := range r {
			reasons[x]++
		}
	}
	return feasible, reasons
}

// errGone: the pod was deleted, replaced or bound by someone else while it
// was being scheduled; there is nothing to do.
var errGone = errors.New("pod gone or bound")

// bind sets the pod's node, and PodScheduled=True, in one compare-and-swap
// write that fails rather than overwrite a bind by anyone else (Kubernetes'
// pods/binding subresource refuses a pod that has a node:
// k8s@v1.37.2:pkg/registry/core/pod/storage/storage.go assignPod).
func (s *scheduler) bind(ctx context.Context, key, uid, node string) (informer.Revision, error) {
	rev, _, err := informer.Update(ctx, s.store, key, func(p *api.Pod) error {
		if p.UID != uid || p.Spec.NodeName != "" || p.Deleting() {
			return errGone
		}
		p.Spec.NodeName = node
		object.SetCondition(&p.Status.Conditions, object.Condition{
			Type: api.PodScheduled, Status: object.ConditionTrue, Reason: "Scheduled",
		}, s.clock.Now())
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return 0, errGone
	}
	return rev, err
}

// unschedulable records that no node fits: PodScheduled=False with reason
// Unschedulable and the message (written only when it changes), and a
// FailedScheduling event (k8s@v1.37.2:pkg/scheduler/schedule_one.go
// handleSchedulingFailure).
func (s *scheduler) unschedulable(ctx context.Context, key, uid, msg string) error {
	s.events.Event(ctx, key, events.Warning, EventFailedScheduling, msg)
	_, _, err := informer.Update(ctx, s.store, key, func(p *api.Pod) error {
		if p.UID != uid || p.Spec.NodeName != "" || p.Deleting() {
			return errGone
		}
		object.SetCondition(&p.Status.Conditions, object.Condition{
			Type: api.PodScheduled, Status: object.ConditionFalse, Reason: api.ReasonUnschedulable, Message: msg,
		}, s.clock.Now())
		return nil
	})
	if err == nil || errors.Is(err, errGone) || errors.Is(err, informer.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("mark %s unschedulable: %w", key, err)
}
