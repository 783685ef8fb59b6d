package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// finalizer is the ReplicaSet controller's: it keeps a deleted ReplicaSet
// in the store until the controller has deleted its pods, so that a
// ReplicaSet deleted while no controller ran still has its pods deleted.
const finalizer = "replicaset.converge.dev/pods"

// podOwner maps a pod to the ReplicaSet that owns it (reconcile.Owns).
func podOwner(_ string, p Pod) (string, bool) { return p.Spec.Owner, p.Spec.Owner != "" }

// rsController is the ReplicaSet controller: it creates and deletes Pod
// objects until each ReplicaSet owns Spec.Replicas pods running its
// Spec.Command, and writes the ReplicaSet's status. It never runs a
// process: the node agent does.
type rsController struct {
	rsInf  *informer.Informer[string, ReplicaSet]
	podInf *informer.Informer[string, Pod]
	rs     informer.Store[string, ReplicaSet]
	pods   informer.Store[string, Pod]
	node   string // where new pods are scheduled
	now    func() time.Time
	// suffix makes the random part of a new pod's name: suffix in the
	// program; a deterministic one under the simulation kit, so that a
	// failing schedule reruns with the same names.
	suffix func() string
	// events records SuccessfulCreate, FailedCreate, SuccessfulDelete and
	// FailedDelete on the ReplicaSet's key; nil records nothing.
	events *events.Recorder
}

func newRSController(rsInf *informer.Informer[string, ReplicaSet], podInf *informer.Informer[string, Pod], s *stores, node string) *rsController {
	return &rsController{rsInf: rsInf, podInf: podInf, rs: s.replicaSets, pods: s.pods, node: node, now: time.Now, suffix: suffix}
}

// Reconcile makes the pods owned by ReplicaSet name match its spec.
//
// It reads its own writes without any code of its own: createPod and
// deletePods report each pod write with reconcile.Wrote, and the controller
// does not reconcile name again until the pod informer has seen them.
// Without that, the reconcile that follows a create would see the informer
// without the new pod and create another (Kubernetes' ReplicaSet controller
// keeps "expectations" for this).
func (c *rsController) Reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	var owned []Pod
	var names []string
	// By name: Owned's order is a map's, and plan keeps it among equals
	// (pods created in one instant), so that the same state always
	// deletes the same pods.
	entries := reconcile.Owned(c.podInf, name)
	slices.SortFunc(entries, func(a, b informer.Entry[string, Pod]) int { return strings.Compare(a.Key, b.Key) })
	for _, e := range entries {
		owned, names = append(owned, e.Value), append(names, e.Key)
	}
	rs, ok := c.rsInf.Get(name)
	if !ok {
		// Deleted past the finalizer (a raw Delete, `etcdctl del`): its
		// pods go all the same.
		return reconcile.Result{}, c.deletePods(ctx, name, names)
	}
	// The finalizer is in place before the first pod, so that a deletion
	// waits for this controller, even one requested while it is down.
	// Deleting, the pods go first: their deletes park the key until the
	// pod informer has them, and the run after, with no pods left, is done
	// and removes the finalizer, which deletes the ReplicaSet.
	live, err := informer.Finalize(ctx, c.rs, name, &rs, finalizer, func(ctx context.Context) (bool, error) {
		return len(names) == 0, c.deletePods(ctx, name, names)
	})
	if !live || err != nil {
		return reconcile.Result{}, err
	}
	if err := validate(rs.Spec); err != nil {
		werr := c.writeStatus(ctx, name, func(st *ReplicaSetStatus, now time.Time) {
			st.Replicas, st.ReadyReplicas = len(owned), countReady(owned)
			object.SetCondition(&st.Conditions, object.Condition{Type: CondReady, Status: object.ConditionFalse,
				Reason: ReasonInvalidSpec, Message: err.Error(), ObservedGeneration: rs.Generation}, now)
			st.ObservedGeneration = rs.Generation
		})
		if werr != nil {
			return reconcile.Result{}, werr // retried
		}
		// Retrying cannot fix the spec: only a new spec can.
		return reconcile.Result{}, reconcile.Terminal(err)
	}

	del, create := plan(rs.Spec, names, owned)
	if err := c.deletePods(ctx, name, del); err != nil {
		return reconcile.Result{}, err
	}
	for range create {
		if err := c.createPod(ctx, name, rs.Spec.Command); err != nil {
			return reconcile.Result{}, err
		}
	}

	var kept []namedPod
	for i, p := range owned {
		if !slices.Contains(del, names[i]) {
			kept = append(kept, namedPod{names[i], p})
		}
	}
	return reconcile.Result{}, c.writeStatus(ctx, name, func(st *ReplicaSetStatus, now time.Time) {
		*st = computeStatus(rs.Spec, rs.Generation, st.Conditions, kept, create, len(del), now)
	})
}

// ignoreNotFound drops informer.ErrNotFound: the key is gone, and its
// deletion reconciles it again.
func ignoreNotFound(err error) error {
	if errors.Is(err, informer.ErrNotFound) {
		return nil
	}
	return err
}

func countReady(pods []Pod) (n int) {
	for _, p := range pods {
		if p.Ready() {
			n++
		}
	}
	return n
}

// validate rejects specs that no retry can satisfy.
func validate(s ReplicaSetSpec) error {
	if s.Replicas < 0 {
		return fmt.Errorf("replicas must not be negative, got %d", s.Replicas)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return errors.New("command is empty")
	}
	return nil
}

// plan decides which of the owned pods to delete (those running an old
// command first, then the surplus) and how many to create. Unlike a
// Kubernetes ReplicaSet, which leaves existing pods alone, it replaces pods
// whose command changed, as a Deployment with the Recreate strategy would.
func plan(spec ReplicaSetSpec, names []string, owned []Pod) (del []string, create int) {
	var current []namedPod
	for i, p := range owned {
		if slices.Equal(p.Spec.Command, spec.Command) {
			current = append(current, namedPod{names[i], p})
		} else {
			del = append(del, names[i])
		}
	}
	if n := len(current) - spec.Replicas; n > 0 {
		// Delete the least useful first: not ready, then crashing more,
		// then the newest (as Kubernetes ranks pods).
		slices.SortStableFunc(current, func(a, b namedPod) int {
			if a.Ready() != b.Ready() {
				if !a.Ready() {
					return -1
				}
				return 1
			}
			if d := b.Status.RestartCount - a.Status.RestartCount; d != 0 {
				return d
			}
			return b.Spec.CreatedAt.Compare(a.Spec.CreatedAt)
		})
		for _, p := range current[:n] {
			del = append(del, p.name)
		}
	}
	return del, max(0, spec.Replicas-len(current))
}

type namedPod struct {
	name string
	Pod
}

// computeStatus is the status of a ReplicaSet with spec at generation gen,
// whose conditions were prev, after the controller kept the pods kept,
// created created more and deleted deleted.
func computeStatus(spec ReplicaSetSpec, gen int64, prev []object.Condition, kept []namedPod, created, deleted int, now time.Time) ReplicaSetStatus {
	st := ReplicaSetStatus{Replicas: len(kept) + created, Conditions: prev, ObservedGeneration: gen}
	var notReady, failing []namedPod
	for _, p := range kept {
		if p.Ready() {
			st.ReadyReplicas++
		} else {
			notReady = append(notReady, p)
		}
		if p.Status.Reason == ReasonInvalidCommand || p.Status.Reason == ReasonCrashLoopBackOff {
			failing = append(failing, p)
		}
	}
	want := spec.Replicas
	ready := object.Condition{Type: CondReady, Status: object.ConditionTrue, Reason: ReasonAllReady,
		Message: fmt.Sprintf("%d/%d replicas ready", st.ReadyReplicas, want), ObservedGeneration: gen}
	switch {
	case created > 0 || deleted > 0:
		ready.Status, ready.Reason = object.ConditionFalse, ReasonScaling
		ready.Message += fmt.Sprintf("; created %d pods, deleted %d", created, deleted)
	case st.ReadyReplicas < want:
		ready.Status, ready.Reason = object.ConditionFalse, ReasonPodsNotReady
		ready.Message += "; waiting for " + describePods(notReady)
	}
	object.SetCondition(&st.Conditions, ready, now)

	failure := object.Condition{Type: CondReplicaFailure, Status: object.ConditionFalse, Reason: ReasonNoFailures,
		ObservedGeneration: gen}
	if len(failing) > 0 {
		failure.Status, failure.Reason = object.ConditionTrue, failing[0].Status.Reason
		for _, p := range failing {
			if p.Status.Reason == ReasonInvalidCommand {
				failure.Reason = ReasonInvalidCommand // the one to fix first
			}
		}
		failure.Message = describePods(failing)
	}
	object.SetCondition(&st.Conditions, failure, now)
	return st
}

// describePods names up to two pods and what is going on with them.
func describePods(pods []namedPod) string {
	var parts []string
	for i, p := range pods {
		if i == 2 {
			parts = append(parts, fmt.Sprintf("and %d more", len(pods)-i))
			break
		}
		s := p.name + " (" + cmp.Or(p.Status.Phase, PhasePending)
		if p.Status.Reason != "" {
			s += ", " + p.Status.Reason
		}
		if p.Status.Message != "" {
			s += ": " + p.Status.Message
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

// writeStatus sets the ReplicaSet's status with set, unless it would not
// change or the ReplicaSet is gone.
func (c *rsController) writeStatus(ctx context.Context, name string, set func(*ReplicaSetStatus, time.Time)) error {
	_, _, err := informer.Update(ctx, c.rs, name, func(rs *ReplicaSet) error {
		set(&rs.Status, c.now())
		return nil
	})
	return ignoreNotFound(err)
}

// createPod creates a pod named after its owner with a random suffix, and
// records it as an event on the owner.
func (c *rsController) createPod(ctx context.Context, owner string, command []string) error {
	pod := Pod{Spec: PodSpec{Owner: owner, Node: c.node, Command: command, CreatedAt: c.now()}}
	for {
		name := owner + "-" + c.suffix()
		rev, err := c.pods.Create(ctx, name, pod)
		if errors.Is(err, informer.ErrConflict) {
			continue // the name is taken
		}
		if err != nil {
			c.events.Eventf(ctx, owner, events.Warning, EventFailedCreate, "Error creating: %v", err)
			return fmt.Errorf("create pod for %s: %w", owner, err)
		}
		reconcile.Wrote(ctx, c.podInf, rev)
		c.events.Eventf(ctx, owner, events.Normal, EventSuccessfulCreate, "Created pod: %s", name)
		return nil
	}
}

// deletePods deletes owner's pods names, and records each as an event on
// the owner.
func (c *rsController) deletePods(ctx context.Context, owner string, names []string) error {
	for _, n := range names {
		rev, err := c.pods.Delete(ctx, n, 0)
		if err != nil {
			c.events.Eventf(ctx, owner, events.Warning, EventFailedDelete, "Error deleting pod %s: %v", n, err)
			return fmt.Errorf("delete pod %s: %w", n, err)
		}
		reconcile.Wrote(ctx, c.podInf, rev) // rev 0 (it was gone already): nothing to wait for
		if rev != 0 {
			c.events.Eventf(ctx, owner, events.Normal, EventSuccessfulDelete, "Deleted pod: %s", n)
		}
	}
	return nil
}

// suffix returns 5 random characters, from Kubernetes' alphabet for
// generated names (no vowels, no confusable characters).
func suffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
