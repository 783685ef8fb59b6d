// Package replicaset is the cluster example's ReplicaSet controller: it keeps
// each ReplicaSet's Replicas pods alive, as Kubernetes' does
// (pkg/controller/replicaset/replica_set.go):
//
//   - Its pods are those that match its selector and name it as their
//     controller owner, by UID. Orphans that match are adopted; owned pods
//     that no longer match are released (controller_ref_manager.go).
//   - Only active pods count: not Succeeded, not Failed, not terminating
//     (controller_utils.go IsPodActive), so a pod stuck on a lost node is
//     replaced at once.
//   - Missing pods are created in slow-start batches of 1, 2, 4, …, stopping
//     after the first batch with an error, at most BurstReplicas a sync
//     (replica_set.go slowStartBatch).
//   - Surplus pods are deleted in Kubernetes' order (controller_utils.go
//     ActivePodsWithRanks): unassigned before assigned, Pending before
//     Unknown before Running, not ready before ready, pods doubled up on a
//     node first, ready for less time first, more restarts first, newer first.
//   - Status: replicas, fully labeled, ready and available (ready for
//     MinReadySeconds) pods, the observed generation, and a ReplicaFailure
//     condition while creates or deletes fail (replica_set_utils.go).
//
// It does not delete the pods of a deleted ReplicaSet: the garbage collector
// does, from their owner references. A ReplicaSet whose deletion was
// requested (foreground deletion) gets no new pods.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

// ControllerName names the controller (its metrics, logs and the owner
// index it adds to the pod informer) and the Source of its events.
const ControllerName = "replicaset-controller"

// BurstReplicas is the most pods one sync creates or deletes (Kubernetes'
// default, replica_set.go).
const BurstReplicas = 500

// Event reasons, as Kubernetes records them on a ReplicaSet.
const (
	EventSuccessfulCreate = "SuccessfulCreate"
	EventFailedCreate     = "FailedCreate"
	EventSuccessfulDelete = "SuccessfulDelete"
	EventFailedDelete     = "FailedDelete"
)

// Index names this controller adds: ReplicaSets by namespace, and orphan
// pods (no controller owner) by namespace, to find the owners an orphan
// may be adopted by.
const (
	indexRSByNamespace     = ControllerName + ".namespace"
	indexOrphansByNamespce = ControllerName + ".orphans"
)

// Options change how the controller is built; the zero value is what Add
// uses.
type Options struct {
	// Suffix makes the random part of a new pod's name. Default: five
	// characters from Kubernetes' alphabet for generated names.
	Suffix func() string
	// UID makes a new pod's UID. Default: api.NewUID.
	UID func() string
	// Wrap, if set, wraps the reconciler (a simulation counts reconciles).
	Wrap func(reconcile.Reconciler[string]) reconcile.Reconciler[string]
	// Controller are options given to reconcile.New after the
	// controller's own, so they override them (a test's clock, one
	// worker). Default: none.
	Controller []reconcile.Option
}

// Add builds the ReplicaSet controller on c and adds it to m.
func Add(m *reconcile.Manager, c *api.Cluster) error {
	ctrl, err := New(c, Options{})
	if err != nil {
		return err
	}
	return m.AddController(ctrl)
}

// New builds the ReplicaSet controller on c's informers and stores, keyed by
// ReplicaSet key. It adds its indexes to c.Informers.ReplicaSets and Pods.
// Errors: a nil c or a missing informer, store or recorder function, and
// reconcile.New's.
func New(c *api.Cluster, o Options) (*reconcile.Controller[string], error) {
	if c == nil || c.Informers.ReplicaSets == nil || c.Informers.Pods == nil || c.Stores.ReplicaSets == nil ||
		c.Stores.Pods == nil || c.Clock == nil {
		return nil, errors.New("replicaset: the cluster needs ReplicaSet and Pod informers and stores, and a clock")
	}
	r := &reconciler{
		rsInf:  c.Informers.ReplicaSets,
		podInf: c.Informers.Pods,
		rs:     c.Stores.ReplicaSets,
		pods:   c.Stores.Pods,
		clock:  c.Clock,
		suffix: o.Suffix,
		uid:    o.UID,
	}
	if r.suffix == nil {
		r.suffix = Suffix
	}
	if r.uid == nil {
		r.uid = api.NewUID
	}
	if c.Recorder != nil {
		r.events = c.Recorder(ControllerName)
	}
	if err := addIndex(r.rsInf, indexRSByNamespace, func(_ string, rs api.ReplicaSet) []string {
		return []string{rs.Namespace}
	}); err != nil {
		return nil, err
	}
	if err := addIndex(r.podInf, indexOrphansByNamespce, func(_ string, p api.Pod) []string {
		if _, ok := api.ControllerOf(p.Metadata); ok {
			return nil
		}
		return []string{p.Namespace}
	}); err != nil {
		return nil, err
	}
	var rec reconcile.Reconciler[string] = r
	if o.Wrap != nil {
		rec = o.Wrap(rec)
	}
	opts := []reconcile.Option{
		reconcile.For(r.rsInf),
		reconcile.Owns(r.podInf, podOwner),
		// An orphan reconciles the ReplicaSets that may adopt it.
		reconcile.Watch(r.podInf, r.adopters),
		reconcile.WithWorkers(5), // kube-controller-manager's --concurrent-replicaset-syncs
		// A new leader acts only on caches that hold its predecessor's
		// last writes, so that it does not create pods twice.
		reconcile.WithHeadBarrier(),
	}
	if clk, ok := c.Clock.(reconcile.Clock); ok {
		opts = append(opts, reconcile.WithClock(clk))
	}
	if c.Logger != nil {
		opts = append(opts, reconcile.WithLogger(c.Logger))
	}
	return reconcile.New(ControllerName, rec, append(opts, o.Controller...)...)
}

// addIndex adds an index unless the informer has it already: a controller
// built again on the same informers (a Manager in standby that leads
// again) files the same way.
func addIndex[V any](inf *informer.Informer[string, V], name string, fn informer.IndexFunc[string, V]) error {
	if inf.HasIndex(name) {
		return nil
	}
	return inf.AddIndex(name, fn)
}

// podOwner names the ReplicaSet a pod's controller reference points at.
// Whether the UID matches is checked in Reconcile, which knows the
// ReplicaSet's.
func podOwner(_ string, p api.Pod) (string, bool) {
	ref, ok := api.ControllerOf(p.Metadata)
	if !ok || ref.Kind != "ReplicaSet" {
		return "", false
	}
	return api.Key(p.Namespace, ref.Name), true
}

// adopters maps an orphan pod to the ReplicaSets of its namespace whose
// selector matches it.
func (r *reconciler) adopters(_ string, p api.Pod) []string {
	if _, ok := api.ControllerOf(p.Metadata); ok || p.Deleting() {
		return nil
	}
	var keys []string
	for _, e := range r.rsInf.ByIndex(indexRSByNamespace, p.Namespace) {
		if e.Value.Spec.Selector.Matches(p.Labels) {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

type reconciler struct {
	rsInf  *informer.Informer[string, api.ReplicaSet]
	podInf *informer.Informer[string, api.Pod]
	rs     informer.Store[string, api.ReplicaSet]
	pods   informer.Store[string, api.Pod]
	clock  clock.PassiveClock
	events *events.Recorder
	suffix func() string
	uid    func() string
}

// Reconcile makes the active pods of ReplicaSet key number its replicas and
// writes its status (replica_set.go syncReplicaSet).
//
// Reading its own writes is reconcile.Wrote's job: each pod create and
// delete is recorded, and the key is not reconciled again until the pod
// informer has them (Kubernetes keeps "expectations" for this). A
// reconcile that fails may have written a pod it could not record: a
// create that timed out after it committed, or a panic between the write
// and Wrote. Its retry, on a pod cache that lags, would create that pod
// again. So a failed reconcile records the pod store's head as its write,
// and the retry waits until the cache has it.
func (r *reconciler) Reconcile(ctx context.Context, key string) (res reconcile.Result, err error) {
	failed := true // until sync returns: a panic unwinds through the defer
	defer func() {
		if failed || err != nil {
			r.awaitPodHead(ctx)
		}
	}()
	res, err = r.sync(ctx, key)
	failed = false
	return res, err
}

// awaitPodHead records the pod store's head revision as a write of this
// reconcile (reconcile.Wrote), if it can read it.
func (r *reconciler) awaitPodHead(ctx context.Context) {
	if head, ok, err := r.podInf.Head(ctx); err == nil && ok {
		reconcile.Wrote(ctx, r.podInf, head)
	}
}

// sync is one reconcile of ReplicaSet key.
func (r *reconciler) sync(ctx context.Context, key string) (reconcile.Result, error) {
	rs, ok := r.rsInf.Get(key)
	if !ok {
		return reconcile.Result{}, nil // the garbage collector deletes its pods
	}
	pods, err := r.claimPods(ctx, key, rs)
	if err != nil {
		return reconcile.Result{}, err
	}
	active := slices.DeleteFunc(pods, func(p namedPod) bool { return !IsPodActive(p.Pod) })
	var manageErr error
	diff := len(active) - int(api.Replicas(rs.Spec.Replicas))
	if !rs.Deleting() {
		manageErr = r.manageReplicas(ctx, key, rs, active, diff)
	}
	now := r.clock.Now()
	st := calculateStatus(rs, active, manageErr, diff, now)
	if _, _, err := informer.Update(ctx, r.rs, key, func(v *api.ReplicaSet) error {
		if v.UID != rs.UID {
			return errGone // replaced by a namesake meanwhile
		}
		v.Status = st
		return nil
	}); err != nil && !errors.Is(err, informer.ErrNotFound) && !errors.Is(err, errGone) {
		return reconcile.Result{}, errors.Join(manageErr, fmt.Errorf("status of replicaset %s: %w", key, err))
	}
	if manageErr != nil {
		return reconcile.Result{}, manageErr
	}
	return reconcile.Result{RequeueAfter: nextAvailable(active, rs.Spec.MinReadySeconds, now)}, nil
}

var errGone = errors.New("replicaset replaced")

// namedPod is a pod with its store key and the revision the cache holds.
type namedPod struct {
	key string
	rev informer.Revision
	api.Pod
}

// claimPods returns the pods rs owns after adopting matching orphans and
// releasing owned pods that no longer match (controller_ref_manager.go
// ClaimPods), sorted by key, so that equal pods are chosen the same way
// every time.
func (r *reconciler) claimPods(ctx context.Context, key string, rs api.ReplicaSet) ([]namedPod, error) {
	var out []namedPod
	for _, e := range reconcile.OwnedBy(r.podInf, ControllerName, key) {
		ref, _ := api.ControllerOf(e.Value.Metadata)
		if ref.UID != rs.UID {
			continue // a namesake's: the garbage collector's to delete
		}
		if rs.Spec.Selector.Matches(e.Value.Labels) {
			out = append(out, namedPod{e.Key, e.Revision, e.Value})
			continue
		}
		if rs.Deleting() {
			continue
		}
		if _, err := r.setOwner(ctx, e.Key, rs, false); err != nil {
			return nil, err
		}
	}
	if !rs.Deleting() {
		var orphans []informer.Entry[string, api.Pod]
		for _, e := range r.podInf.ByIndex(indexOrphansByNamespce, rs.Namespace) {
			if !e.Value.Deleting() && rs.Spec.Selector.Matches(e.Value.Labels) {
				orphans = append(orphans, e)
			}
		}
		if len(orphans) > 0 {
			// Adopt only for a ReplicaSet that still is and is not going
			// away, read from the store, not the cache (RecheckDeletionTimestamp).
			fresh, _, ok, err := r.rs.Get(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("replicaset %s: recheck before adopting: %w", key, err)
			}
			if ok && fresh.UID == rs.UID && !fresh.Deleting() {
				for _, e := range orphans {
					adopted, err := r.setOwner(ctx, e.Key, rs, true)
					if err != nil {
						return nil, err
					}
					if adopted != nil {
						out = append(out, namedPod{e.Key, e.Revision, *adopted})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b namedPod) int { return strings.Compare(a.key, b.key) })
	return out, nil
}

// setOwner adopts (or releases) pod key: adds rs as its controller owner
// if it has none, or removes rs's reference. It returns the pod as adopted
// (nil if it was not). The write comes back through the informer and
// reconciles rs again.
func (r *reconciler) setOwner(ctx context.Context, key string, rs api.ReplicaSet, adopt bool) (*api.Pod, error) {
	var adopted *api.Pod
	rev, _, err := informer.Update(ctx, r.pods, key, func(p *api.Pod) error {
		adopted = nil
		if adopt {
			if _, ok := api.ControllerOf(p.Metadata); ok || p.Deleting() || !rs.Spec.Selector.Matches(p.Labels) {
				return nil
			}
			p.OwnerReferences = append(slices.Clip(p.OwnerReferences), ControllerRef(rs))
			adopted = p
			return nil
		}
		p.OwnerReferences = slices.DeleteFunc(slices.Clone(p.OwnerReferences),
			func(ref api.OwnerReference) bool { return ref.UID == rs.UID })
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		verb := "release"
		if adopt {
			verb = "adopt"
		}
		return nil, fmt.Errorf("replicaset %s: %s pod %s: %w", rs.Key(), verb, key, err)
	}
	reconcile.Wrote(ctx, r.podInf, rev)
	return adopted, nil
}

// ControllerRef is the owner reference a ReplicaSet's pods carry
// (metav1.NewControllerRef): controller and blocking its owner's
// foreground deletion.
func ControllerRef(rs api.ReplicaSet) api.OwnerReference {
	return api.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
		Controller: true, BlockOwnerDeletion: true}
}
