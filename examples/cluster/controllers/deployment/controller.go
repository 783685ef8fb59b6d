// Package deployment is the cluster example's Deployment controller: it
// rolls a Deployment's pods from one version of its template to the next
// through one ReplicaSet per version, as Kubernetes' does
// (pkg/controller/deployment):
//
//   - The ReplicaSet of a template is named "<deployment>-<pod-template-hash>",
//     the hash also in its selector and its pods' labels (sync.go
//     getNewReplicaSet); a template seen before reuses its ReplicaSet, which
//     is how a rollback (rollout undo copies an old template back) reuses
//     the old ReplicaSet and bumps its revision.
//   - RollingUpdate grows the new ReplicaSet while the pods stay within
//     replicas+maxSurge and shrinks old ones while at least
//     replicas−maxUnavailable stay available (rolling.go); Recreate scales
//     the old ones to zero and waits for their pods to go first
//     (recreate.go).
//   - Revisions: the new ReplicaSet's revision annotation is the highest of
//     the old ones plus one, copied to the Deployment; old ReplicaSets scaled
//     to zero beyond revisionHistoryLimit are deleted (sync.go
//     cleanupDeployment).
//   - A scaling (replicas changed mid-rollout, or while paused) is spread
//     over the ReplicaSets in proportion to their size (sync.go scale); a
//     paused Deployment scales but does not roll.
//   - Status and conditions Available and Progressing, with
//     ProgressDeadlineExceeded once the rollout made no progress for
//     progressDeadlineSeconds, checked again when the deadline comes
//     (progress.go).
//
// Deliberate differences, so that a rollout holds its bounds at every
// moment, also across restarts and caches that lag (the simulation in
// sim_test.go finds each one broken without them):
//
//   - The pods a rolling update may add are bounded by each ReplicaSet's
//     replicas, its status's pods and its pods in the cache, whichever is
//     largest, so that pods still being deleted count (as Kubernetes'
//     podReplacementPolicy TerminationComplete has it). Counting replicas
//     only, as Kubernetes does by default, ran 6 pods at once for 4
//     replicas and a surge of 1.
//   - The pods counted available for scaling down are the least of the
//     status's count, the replicas and the available pods in the cache: a
//     status can still count pods being deleted.
//   - A rollout step waits until the ReplicaSet and pod caches hold the
//     stores' head revisions as read when it found them behind.
package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

// ControllerName names the controller and is the Source of its events.
const ControllerName = "deployment-controller"

// Event reasons, as Kubernetes records them on a Deployment.
const (
	EventScalingReplicaSet = "ScalingReplicaSet"
	EventSelectingAll      = "SelectingAll"
	EventFailedRSCreate    = "ReplicaSetCreateError"
	EventInvalidSpec       = "InvalidSpec"
)

// Index names this controller adds: ReplicaSets without a controller by
// namespace (candidates for adoption), and pods by their controller
// owner's UID (the pods of a ReplicaSet, for Recreate).
const (
	indexOrphanRSs    = ControllerName + ".orphans"
	indexPodsByRSUID  = ControllerName + ".pods-by-owner-uid"
	deploymentKind    = "Deployment"
	replicaSetKind    = "ReplicaSet"
	deploymentVersion = "apps/v1"
)

// Options change how the controller is built; the zero value is what Add
// uses.
type Options struct {
	// UID makes a new ReplicaSet's UID. Default: api.NewUID.
	UID func() string
	// Wrap, if set, wraps the reconciler (a simulation counts reconciles).
	Wrap func(reconcile.Reconciler[string]) reconcile.Reconciler[string]
	// Controller are options given to reconcile.New after the
	// controller's own, so they override them. Default: none.
	Controller []reconcile.Option
}

// Add builds the Deployment controller on c and adds it to m.
func Add(m *reconcile.Manager, c *api.Cluster) error {
	ctrl, err := New(c, Options{})
	if err != nil {
		return err
	}
	return m.AddController(ctrl)
}

// New builds the Deployment controller on c's informers and stores, keyed
// by Deployment key. It adds its indexes to c.Informers.ReplicaSets and
// Pods. Errors: a nil c or a missing informer, store or clock, and
// reconcile.New's.
func New(c *api.Cluster, o Options) (*reconcile.Controller[string], error) {
	if c == nil || c.Informers.Deployments == nil || c.Informers.ReplicaSets == nil || c.Informers.Pods == nil ||
		c.Stores.Deployments == nil || c.Stores.ReplicaSets == nil || c.Clock == nil {
		return nil, errors.New("deployment: the cluster needs Deployment, ReplicaSet and Pod informers, their stores, and a clock")
	}
	r := &reconciler{
		dInf: c.Informers.Deployments, rsInf: c.Informers.ReplicaSets, podInf: c.Informers.Pods,
		ds: c.Stores.Deployments, rss: c.Stores.ReplicaSets, clock: c.Clock, uid: o.UID,
		waiting: map[string][2]informer.Revision{},
	}
	if r.uid == nil {
		r.uid = api.NewUID
	}
	if c.Recorder != nil {
		r.events = c.Recorder(ControllerName)
	}
	if err := addIndex(r.rsInf, indexOrphanRSs, func(_ string, rs api.ReplicaSet) []string {
		if _, ok := api.ControllerOf(rs.Metadata); ok {
			return nil
		}
		return []string{rs.Namespace}
	}); err != nil {
		return nil, err
	}
	if err := addIndex(r.podInf, indexPodsByRSUID, func(_ string, p api.Pod) []string {
		if ref, ok := api.ControllerOf(p.Metadata); ok && ref.Kind == replicaSetKind {
			return []string{ref.UID}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var rec reconcile.Reconciler[string] = r
	if o.Wrap != nil {
		rec = o.Wrap(rec)
	}
	opts := []reconcile.Option{
		reconcile.For(r.dInf),
		reconcile.Owns(r.rsInf, rsOwner),
		// An orphan ReplicaSet reconciles the Deployments that may adopt it.
		reconcile.Watch(r.rsInf, r.adopters),
		// A deleted pod reconciles its Deployment: Recreate waits for the
		// old pods to be gone (deployment_controller.go deletePod).
		reconcile.Watch(r.podInf, r.deploymentOfPod, func(ch reconcile.Change[string, api.Pod]) bool {
			return ch.Kind == reconcile.Deleted
		}),
		reconcile.WithWorkers(5), // kube-controller-manager's --concurrent-deployment-syncs
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

func addIndex[V any](inf *informer.Informer[string, V], name string, fn informer.IndexFunc[string, V]) error {
	if inf.HasIndex(name) {
		return nil
	}
	return inf.AddIndex(name, fn)
}

// rsOwner names the Deployment a ReplicaSet's controller reference points
// at; Reconcile checks the UID.
func rsOwner(_ string, rs api.ReplicaSet) (string, bool) {
	ref, ok := api.ControllerOf(rs.Metadata)
	if !ok || ref.Kind != deploymentKind {
		return "", false
	}
	return api.Key(rs.Namespace, ref.Name), true
}

// adopters maps an orphan ReplicaSet to the Deployments of its namespace
// whose selector matches it.
func (r *reconciler) adopters(_ string, rs api.ReplicaSet) []string {
	if _, ok := api.ControllerOf(rs.Metadata); ok || rs.Deleting() {
		return nil
	}
	var keys []string
	for _, e := range r.dInf.List() {
		if e.Value.Namespace == rs.Namespace && e.Value.Spec.Selector.Matches(rs.Labels) {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

// deploymentOfPod maps a pod to the Deployment that controls its
// ReplicaSet.
func (r *reconciler) deploymentOfPod(_ string, p api.Pod) []string {
	ref, ok := api.ControllerOf(p.Metadata)
	if !ok || ref.Kind != replicaSetKind {
		return nil
	}
	rs, ok := r.rsInf.Get(api.Key(p.Namespace, ref.Name))
	if !ok || rs.UID != ref.UID {
		return nil
	}
	if d, ok := rsOwner("", rs); ok {
		return []string{d}
	}
	return nil
}

type reconciler struct {
	dInf   *informer.Informer[string, api.Deployment]
	rsInf  *informer.Informer[string, api.ReplicaSet]
	podInf *informer.Informer[string, api.Pod]
	ds     informer.Store[string, api.Deployment]
	rss    informer.Store[string, api.ReplicaSet]
	clock  clock.PassiveClock
	events *events.Recorder
	uid    func() string

	mu sync.Mutex
	// waiting holds, per key that had to wait for caches at the head,
	// the ReplicaSet and pod store heads it waits for.
	waiting map[string][2]informer.Revision
}

// pass is one reconcile of one Deployment: d is a working copy whose
// revision annotation and status conditions change on the way, written
// back once at the end; rsList are working copies of its ReplicaSets,
// updated as they are written.
type pass struct {
	*reconciler
	ctx    context.Context
	key    string
	d      *api.Deployment
	rsList []*api.ReplicaSet
	now    time.Time
}

var errGone = errors.New("replaced by a namesake")

// Reconcile brings Deployment key's ReplicaSets one step closer to its
// spec and writes its status (deployment_controller.go syncDeployment).
func (r *reconciler) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	cached, ok := r.dInf.Get(key)
	if !ok {
		r.forget(key)
		return reconcile.Result{}, nil // the garbage collector deletes its ReplicaSets
	}
	d := cached
	s := &pass{reconciler: r, ctx: ctx, key: key, d: &d, now: r.clock.Now()}
	if len(d.Spec.Selector.MatchLabels) == 0 {
		r.events.Eventf(ctx, key, events.Warning, EventSelectingAll,
			"This deployment is selecting all pods. A non-empty selector is required.")
		d.Status.ObservedGeneration = d.Generation
		return reconcile.Result{}, s.write(cached, d.Status)
	}
	if _, _, err := fenceposts(&d); err != nil && isRollingUpdate(&d) {
		r.events.Eventf(ctx, key, events.Warning, EventInvalidSpec, "%v", err)
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("deployment %s: %w", key, err))
	}
	var err error
	if s.rsList, err = s.claimReplicaSets(); err != nil {
		return reconcile.Result{}, err
	}
	if !d.Deleting() {
		if fresh, err := s.cachesAtHead(); err != nil || !fresh {
			return reconcile.Result{RequeueAfter: cacheRecheck}, err
		}
	}
	var st api.DeploymentStatus
	var requeue time.Duration
	switch {
	case d.Deleting():
		st, err = s.syncStatusOnly()
	case d.Spec.Paused:
		s.checkPausedConditions()
		st, err = s.syncScale()
	default:
		s.checkPausedConditions()
		var scaling bool
		if scaling, err = s.isScalingEvent(); err == nil {
			switch {
			case scaling:
				st, err = s.syncScale()
			case isRollingUpdate(&d):
				st, requeue, err = s.rolloutRolling()
			default:
				st, requeue, err = s.rolloutRecreate()
			}
		}
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: requeue}, s.write(cached, st)
}

// cachesAtHead reports whether the ReplicaSet and pod caches are fresh
// enough to scale on: they hold the stores' head revisions as read when
// this key last had to wait. If not, the key waits (reconcile.Wrote) until
// they do. A rollout step scales on ReplicaSet statuses and pods that the
// ReplicaSet controller and the node agents write: on caches that lag
// (after a restart, or a watch that expired and relisted) it could count
// pods that are gone as available and scale below replicas−maxUnavailable.
// Kubernetes takes the risk. A key waits once per stale read, for the
// head as it was then, not for a head that moves on with every write of a
// busy cluster: that could make it wait forever.
func (s *pass) cachesAtHead() (bool, error) {
	infs := [2]interface {
		Head(context.Context) (informer.Revision, bool, error)
		LastRevision() informer.Revision
	}{s.rsInf, s.podInf}
	s.mu.Lock()
	waited, ok := s.waiting[s.key]
	s.mu.Unlock()
	if ok && infs[0].LastRevision() >= waited[0] && infs[1].LastRevision() >= waited[1] {
		s.forget(s.key)
		return true, nil
	}
	var heads [2]informer.Revision
	fresh := true
	for i, inf := range infs {
		head, ok, err := inf.Head(s.ctx)
		if err != nil {
			return false, fmt.Errorf("deployment %s: read the store's head: %w", s.key, err)
		}
		if ok && inf.LastRevision() < head {
			reconcile.Wrote(s.ctx, inf.(informer.Revisioned), head)
			heads[i], fresh = head, false
		}
	}
	if !fresh {
		s.mu.Lock()
		s.waiting[s.key] = heads
		s.mu.Unlock()
	}
	return fresh, nil
}

// cacheRecheck is how soon a key that found its caches behind comes up
// again: at once, in effect. Wrote gates a key that comes up, it does not
// queue one, and the head a key waits for is often another Deployment's
// write, which does not map to this key: the read-your-writes gate parks
// the key when it comes up and queues it the moment the caches reach the
// head (or at the read-your-writes timeout). A longer delay would only add
// itself to every wait.
const cacheRecheck = time.Millisecond

// forget drops what key waited for.
func (r *reconciler) forget(key string) {
	r.mu.Lock()
	delete(r.waiting, key)
	r.mu.Unlock()
}

// write writes the working copy's revision annotation and status st,
// unless the Deployment was replaced or deleted meanwhile.
func (s *pass) write(cached api.Deployment, st api.DeploymentStatus) error {
	rev := s.d.Annotations[api.RevisionAnnotation]
	_, _, err := informer.Update(s.ctx, s.ds, s.key, func(v *api.Deployment) error {
		if v.UID != cached.UID {
			return errGone
		}
		if rev != "" {
			v.Annotations, _ = withAnnotation(v.Annotations, api.RevisionAnnotation, rev)
		}
		v.Status = st
		return nil
	})
	if err != nil && !errors.Is(err, informer.ErrNotFound) && !errors.Is(err, errGone) {
		return fmt.Errorf("deployment %s: write status: %w", s.key, err)
	}
	return nil
}

// claimReplicaSets returns the ReplicaSets d controls, by UID, after
// adopting orphans its selector matches and releasing those it no longer
// matches (deployment_controller.go getReplicaSetsForDeployment), oldest
// first.
func (s *pass) claimReplicaSets() ([]*api.ReplicaSet, error) {
	d := s.d
	var out []*api.ReplicaSet
	for _, e := range reconcile.OwnedBy(s.rsInf, ControllerName, s.key) {
		rs := e.Value
		if ref, _ := api.ControllerOf(rs.Metadata); ref.UID != d.UID {
			continue
		}
		if d.Spec.Selector.Matches(rs.Labels) {
			out = append(out, &rs)
		} else if !d.Deleting() {
			if _, err := s.setOwner(e.Key, false); err != nil {
				return nil, err
			}
		}
	}
	if !d.Deleting() {
		for _, e := range s.rsInf.ByIndex(indexOrphanRSs, d.Namespace) {
			if e.Value.Deleting() || !d.Spec.Selector.Matches(e.Value.Labels) {
				continue
			}
			adopted, err := s.setOwner(e.Key, true)
			if err != nil {
				return nil, err
			}
			if adopted != nil {
				out = append(out, adopted)
			}
		}
	}
	sortByCreation(out)
	return out, nil
}

// setOwner adopts ReplicaSet key as d's or releases it; it returns the
// adopted ReplicaSet (nil if it was not adopted).
func (s *pass) setOwner(key string, adopt bool) (*api.ReplicaSet, error) {
	var adopted *api.ReplicaSet
	rev, _, err := informer.Update(s.ctx, s.rss, key, func(rs *api.ReplicaSet) error {
		adopted = nil
		if adopt {
			if _, ok := api.ControllerOf(rs.Metadata); ok || rs.Deleting() || !s.d.Spec.Selector.Matches(rs.Labels) {
				return nil
			}
			rs.OwnerReferences = append(slices.Clip(rs.OwnerReferences), ControllerRef(*s.d))
			adopted = rs
			return nil
		}
		rs.OwnerReferences = slices.DeleteFunc(slices.Clone(rs.OwnerReferences),
			func(ref api.OwnerReference) bool { return ref.UID == s.d.UID })
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("deployment %s: claim replicaset %s: %w", s.key, key, err)
	}
	reconcile.Wrote(s.ctx, s.rsInf, rev)
	return adopted, nil
}

// ControllerRef is the owner reference a Deployment's ReplicaSets carry.
func ControllerRef(d api.Deployment) api.OwnerReference {
	return api.OwnerReference{APIVersion: deploymentVersion, Kind: deploymentKind, Name: d.Name, UID: d.UID,
		Controller: true, BlockOwnerDeletion: true}
}

// sortByCreation sorts oldest first, then by name
// (controller.ReplicaSetsByCreationTimestamp).
func sortByCreation(rss []*api.ReplicaSet) {
	slices.SortStableFunc(rss, func(a, b *api.ReplicaSet) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
