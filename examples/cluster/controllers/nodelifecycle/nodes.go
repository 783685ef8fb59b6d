package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// The taints this controller owns; a user's taint of another key or effect
// is never touched.
var (
	controllerTaintKeys = []string{api.TaintNodeNotReady, api.TaintNodeUnreachable}
)

func hasTaint(taints []api.Taint, key, effect string) bool {
	return slices.ContainsFunc(taints, func(t api.Taint) bool { return t.Key == key && t.Effect == effect })
}

// withTaint returns taints with key:effect added (at now), a new slice;
// taints itself if it is there already.
func withTaint(taints []api.Taint, key, effect string, now time.Time) []api.Taint {
	if hasTaint(taints, key, effect) {
		return taints
	}
	t := api.Taint{Key: key, Effect: effect}
	if effect == api.TaintNoExecute {
		t.TimeAdded = now.UTC()
	}
	return append(slices.Clip(taints), t)
}

// withoutTaint returns taints without key:effect, a new slice; taints itself
// if it is not there.
func withoutTaint(taints []api.Taint, key, effect string) []api.Taint {
	if !hasTaint(taints, key, effect) {
		return taints
	}
	out := make([]api.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != key || t.Effect != effect {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// noExecuteKeyFor is the NoExecute taint a node that is not Ready gets:
// not-ready if its agent says Ready=False, unreachable if nobody knows
// (k8s@v1.37.2:pkg/controller/nodelifecycle/node_lifecycle_controller.go
// processTaintBaseEviction); none for a Ready node or one that never
// reported yet.
func noExecuteKeyFor(n api.Node) string {
	switch readyStatus(n) {
	case object.ConditionFalse:
		return api.TaintNodeNotReady
	case object.ConditionUnknown:
		return api.TaintNodeUnreachable
	}
	return ""
}

// syncHealth writes what the lease says about node n: Ready=Unknown once
// the grace period has passed, Ready=True again (if this controller had
// set it Unknown) once the lease is renewed, the NoSchedule taints that
// follow Ready and cordon at once (Kubernetes' doNoScheduleTaintingPass),
// the NoExecute taints off a Ready node and swapped between not-ready and
// unreachable when the reason changes (markNodeAsReachable,
// processTaintBaseEviction). It returns the node as it now is.
func (l *lifecycle) syncHealth(ctx context.Context, n api.Node, now time.Time) (api.Node, error) {
	last, grace, fresh := l.probe(n, now)
	expired := now.After(last.Add(grace))
	before := readyStatus(n)
	apply := func(n *api.Node) {
		setReady(n, expired, fresh, now)
		syncNoScheduleTaints(n, now)
		syncNoExecuteTaints(n, now)
	}
	// The cached node first: a pass that changes nothing reads nothing
	// from the store. The helpers never write into the cached value's
	// slices.
	out := n
	if apply(&out); reflect.DeepEqual(out, n) {
		return n, nil
	}
	_, _, err := informer.Update(ctx, l.store, n.Name, func(n *api.Node) error {
		apply(n)
		out = *n
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("node %s: %w", n.Name, err)
	}
	after := readyStatus(out)
	switch {
	case before == object.ConditionTrue && after != object.ConditionTrue:
		// Kubernetes' RecordNodeStatusChange (controller/util/node).
		l.events.Eventf(ctx, n.Name, events.Normal, EventNodeNotReady, "Node %s status is now: %s", n.Name, EventNodeNotReady)
	case before != object.ConditionTrue && after == object.ConditionTrue:
		l.events.Eventf(ctx, n.Name, events.Normal, EventNodeReady, "Node %s status is now: %s", n.Name, EventNodeReady)
	}
	return out, nil
}

// setReady sets n's Ready condition from its lease: Unknown once expired
// (Kubernetes' tryUpdateNodeHealth), True again when the lease is fresh
// and Unknown was this controller's verdict. A Ready=False the agent
// reports is the agent's, and stays.
func setReady(n *api.Node, expired, fresh bool, now time.Time) {
	c, ok := object.FindCondition(n.Status.Conditions, api.NodeReady)
	switch {
	case expired && !ok:
		object.SetCondition(&n.Status.Conditions, object.Condition{Type: api.NodeReady, Status: object.ConditionUnknown,
			Reason: ReasonNodeStatusNeverSeen, Message: messageNodeStatusNeverSeen}, now.UTC())
	case expired && c.Status != object.ConditionUnknown:
		object.SetCondition(&n.Status.Conditions, object.Condition{Type: api.NodeReady, Status: object.ConditionUnknown,
			Reason: ReasonNodeStatusUnknown, Message: messageNodeStatusUnknown}, now.UTC())
	case !expired && fresh && ok && c.Status == object.ConditionUnknown &&
		(c.Reason == ReasonNodeStatusUnknown || c.Reason == ReasonNodeStatusNeverSeen):
		object.SetCondition(&n.Status.Conditions, object.Condition{Type: api.NodeReady, Status: object.ConditionTrue,
			Reason: ReasonNodeLeaseRenewed, Message: "The node's lease is renewed again."}, now.UTC())
	}
}

// syncNoScheduleTaints keeps the NoSchedule taints that mirror n's state:
// not-ready while Ready is False, unreachable while Unknown, unschedulable
// while cordoned (TaintNodesByCondition,
// k8s@v1.37.2:pkg/controller/nodelifecycle/node_lifecycle_controller.go
// doNoScheduleTaintingPass).
func syncNoScheduleTaints(n *api.Node, now time.Time) {
	status := readyStatus(*n)
	want := map[string]bool{
		api.TaintNodeNotReady:      status == object.ConditionFalse,
		api.TaintNodeUnreachable:   status == object.ConditionUnknown,
		api.TaintNodeUnschedulable: n.Spec.Unschedulable,
	}
	for _, key := range []string{api.TaintNodeNotReady, api.TaintNodeUnreachable, api.TaintNodeUnschedulable} {
		if want[key] {
			n.Spec.Taints = withTaint(n.Spec.Taints, key, api.TaintNoSchedule, now)
		} else {
			n.Spec.Taints = withoutTaint(n.Spec.Taints, key, api.TaintNoSchedule)
		}
	}
}

// syncNoExecuteTaints takes the NoExecute taints off a Ready node, and on a
// node that has one swaps it at once for the one its Ready status calls
// for; adding the first one is the rate-limited queue's work.
func syncNoExecuteTaints(n *api.Node, now time.Time) {
	want := noExecuteKeyFor(*n)
	if readyStatus(*n) == object.ConditionTrue {
		for _, key := range controllerTaintKeys {
			n.Spec.Taints = withoutTaint(n.Spec.Taints, key, api.TaintNoExecute)
		}
		return
	}
	if want == "" {
		return
	}
	for _, other := range controllerTaintKeys {
		if other != want && hasTaint(n.Spec.Taints, other, api.TaintNoExecute) {
			n.Spec.Taints = withTaint(withoutTaint(n.Spec.Taints, other, api.TaintNoExecute), want, api.TaintNoExecute, now)
		}
	}
}

// addNoExecuteTaint gives a node that is still not Ready its NoExecute
// taint, TimeAdded now.
func (l *lifecycle) addNoExecuteTaint(ctx context.Context, name string, now time.Time) error {
	_, _, err := informer.Update(ctx, l.store, name, func(n *api.Node) error {
		if key := noExecuteKeyFor(*n); key != "" {
			n.Spec.Taints = withTaint(n.Spec.Taints, key, api.TaintNoExecute, now)
		}
		return nil
	})
	if err != nil && !errors.Is(err, informer.ErrNotFound) {
		return fmt.Errorf("taint node %s: %w", name, err)
	}
	return nil
}

// removeNoExecuteTaints takes this controller's NoExecute taints off a node.
func (l *lifecycle) removeNoExecuteTaints(ctx context.Context, name string) error {
	_, _, err := informer.Update(ctx, l.store, name, func(n *api.Node) error {
		for _, key := range controllerTaintKeys {
			n.Spec.Taints = withoutTaint(n.Spec.Taints, key, api.TaintNoExecute)
		}
		return nil
	})
	if err != nil && !errors.Is(err, informer.ErrNotFound) {
		return fmt.Errorf("untaint node %s: %w", name, err)
	}
	return nil
}
