package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

// ownerIndex files pods under the name of the ReplicaSet that owns them.
const ownerIndex = "owner"

// podOwner is the pod informer's owner index, and the map from a pod's
// change to the ReplicaSet to reconcile.
func podOwner(_ string, p Pod) []string { return []string{p.Spec.Owner} }

// rsController is the ReplicaSet controller: it creates and deletes Pod
// objects until each ReplicaSet owns Spec.Replicas pods running its
// Spec.Command, and writes the ReplicaSet's status. It never runs a
// process: the node agent does.
type rsController struct {
	rsInf  *informer.Informer[string, ReplicaSet]
	podInf *informer.Informer[string, Pod]
	rs     Store[ReplicaSet]
	pods   Store[Pod]
	node   string // where new pods are scheduled
	now    func() time.Time

	mu sync.Mutex
	// written is, per ReplicaSet, the revision of the controller's last
	// pod create or delete: until the pod informer has seen it, the
	// informer's view of the pods is older than the controller's own writes.
	written map[string]informer.Revision
}

func newRSController(rsInf *informer.Informer[string, ReplicaSet], podInf *informer.Informer[string, Pod], s *stores, node string) *rsController {
	return &rsController{rsInf: rsInf, podInf: podInf, rs: s.replicaSets, pods: s.pods, node: node,
		now: time.Now, written: make(map[string]informer.Revision)}
}

// Reconcile makes the pods owned by ReplicaSet name match its spec.
func (c *rsController) Reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	// Read your own writes. Without this, the reconcile that follows a
	// create would see the informer without the new pod and create
	// another (Kubernetes' ReplicaSet controller keeps "expectations" for
	// this). The change still on its way reconciles name again anyway.
	c.mu.Lock()
	want := c.written[name]
	c.mu.Unlock()
	if c.podInf.LastRevision() < want {
		return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
	}

	var owned []Pod
	var names []string
	for _, e := range c.podInf.ByIndex(ownerIndex, name) {
		owned, names = append(owned, e.Value), append(names, e.Key)
	}
	rs, ok := c.rsInf.Get(name)
	if !ok {
		// Cascading delete: the ReplicaSet is gone, so are its pods.
		if len(names) == 0 {
			c.mu.Lock()
			delete(c.written, name)
			c.mu.Unlock()
		}
		return reconcile.Result{}, c.deletePods(ctx, name, names)
	}
	if err := validate(rs.Spec); err != nil {
		werr := c.writeStatus(ctx, name, rs.Generation, func(st *ReplicaSetStatus, now time.Time) {
			st.Conditions = setCondition(st.Conditions, Condition{Type: CondReady, Status: "False",
				Reason: ReasonInvalidSpec, Message: err.Error()}, now)
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
	return reconcile.Result{}, c.writeStatus(ctx, name, rs.Generation, func(st *ReplicaSetStatus, now time.Time) {
		*st = computeStatus(rs.Spec, st.Conditions, kept, create, len(del), now)
	})
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

// computeStatus is the status of a ReplicaSet with spec, whose conditions
// were prev, after the controller kept the pods kept, created created more
// and deleted deleted. writeStatus sets ObservedGeneration.
func computeStatus(spec ReplicaSetSpec, prev []Condition, kept []namedPod, created, deleted int, now time.Time) ReplicaSetStatus {
	st := ReplicaSetStatus{Replicas: len(kept) + created, Conditions: prev}
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
	ready := Condition{Type: CondReady, Status: "True", Reason: ReasonAllReady,
		Message: fmt.Sprintf("%d/%d replicas ready", st.ReadyReplicas, want)}
	switch {
	case created > 0 || deleted > 0:
		ready.Status, ready.Reason = "False", ReasonScaling
		ready.Message += fmt.Sprintf("; created %d pods, deleted %d", created, deleted)
	case st.ReadyReplicas < want:
		ready.Status, ready.Reason = "False", ReasonPodsNotReady
		ready.Message += "; waiting for " + describePods(notReady)
	}
	st.Conditions = setCondition(st.Conditions, ready, now)

	failure := Condition{Type: CondReplicaFailure, Status: "False", Reason: ReasonNoFailures}
	if len(failing) > 0 {
		failure.Status, failure.Reason = "True", failing[0].Status.Reason
		for _, p := range failing {
			if p.Status.Reason == ReasonInvalidCommand {
				failure.Reason = ReasonInvalidCommand // the one to fix first
			}
		}
		failure.Message = describePods(failing)
	}
	st.Conditions = setCondition(st.Conditions, failure, now)
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
func (c *rsController) writeStatus(ctx context.Context, name string, gen int64, set func(*ReplicaSetStatus, time.Time)) error {
	return updateStatus(ctx, c.rs, name, func(rs *ReplicaSet, exists bool) bool {
		if !exists {
			return false
		}
		st := rs.Status
		set(&st, c.now())
		st.ObservedGeneration = gen
		if sameJSON(st, rs.Status) {
			return false
		}
		rs.Status = st
		return true
	})
}

// createPod creates a pod named after its owner with a random suffix.
func (c *rsController) createPod(ctx context.Context, owner string, command []string) error {
	pod := Pod{Spec: PodSpec{Owner: owner, Node: c.node, Command: command, CreatedAt: c.now()}}
	for {
		rev, err := c.pods.Create(ctx, owner+"-"+suffix(), pod)
		if errors.Is(err, informer.ErrConflict) {
			continue // the name is taken
		}
		if err != nil {
			return fmt.Errorf("create pod for %s: %w", owner, err)
		}
		c.wrote(owner, rev)
		return nil
	}
}

func (c *rsController) deletePods(ctx context.Context, owner string, names []string) error {
	for _, n := range names {
		rev, err := c.pods.Delete(ctx, n, 0)
		if err != nil {
			return fmt.Errorf("delete pod %s: %w", n, err)
		}
		if rev != 0 { // 0: it was gone already
			c.wrote(owner, rev)
		}
	}
	return nil
}

func (c *rsController) wrote(owner string, rev informer.Revision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[owner] = max(c.written[owner], rev)
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
