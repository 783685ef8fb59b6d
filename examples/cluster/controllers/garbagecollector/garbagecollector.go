// Package garbagecollector is the cluster example's garbage collector: it
// deletes the dependents of deleted owners, following ownerReferences by
// UID across every kind the cluster has, as Kubernetes' does
// (pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteItem,
// processDeletingDependentsItem, orphanDependents). It knows no controller:
// a Deployment owns ReplicaSets and a ReplicaSet owns pods only because
// their ownerReferences say so.
//
// A deletion's propagation policy is recorded as Kubernetes' API server
// records it (apiserver's registry/generic/registry/store.go):
//
//   - Background (no finalizer): the owner is deleted at once; its
//     dependents then name an owner that is gone (dangling) and are
//     deleted.
//   - Foreground (finalizer "foregroundDeletion", deletion requested): the
//     owner stays while its dependents are deleted, in foreground too if
//     they have dependents of their own; once no dependent with
//     blockOwnerDeletion is left, the finalizer goes and the owner with it.
//   - Orphan (finalizer "orphan", deletion requested): the owner's
//     references are removed from its dependents, then the finalizer, and
//     the owner is deleted; the dependents stay.
//
// A dependent with another owner that still exists (a solid one) is not
// deleted: only its references to the owners that are gone or going are
// removed. An owner is taken for gone only when the store, not just the
// cache, says so. A reference to a kind the cluster does not have is left
// alone. A reference without a UID (the API server should give every
// object one) names its owner by kind and name.
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/reconcile"
)

// ControllerName names the controller.
const ControllerName = "garbage-collector"

// Options change how the collector is built; the zero value is what Add
// uses.
type Options struct {
	// Wrap, if set, wraps the reconciler (a simulation counts reconciles).
	Wrap func(reconcile.Reconciler[string]) reconcile.Reconciler[string]
	// Controller are options given to reconcile.New after the
	// collector's own, so they override them. Default: none.
	Controller []reconcile.Option
}

// Add builds the garbage collector on c and adds it to m.
func Add(m *reconcile.Manager, c *api.Cluster) error {
	ctrl, err := New(c, Options{})
	if err != nil {
		return err
	}
	return m.AddController(ctrl)
}

// New builds the garbage collector over every kind of c that has an
// informer and a store, adding an owner-UID index to each informer. Its
// keys are "<Kind>/<store key>" ("Pod/default/web-7c9f-x2k4p").
// Errors: a nil c or clock, no kind at all, and reconcile.New's.
func New(c *api.Cluster, o Options) (*reconcile.Controller[string], error) {
	if c == nil || c.Clock == nil {
		return nil, errors.New("garbagecollector: the cluster needs a clock")
	}
	ks, err := kinds(c)
	if err != nil {
		return nil, fmt.Errorf("garbagecollector: %w", err)
	}
	if len(ks) == 0 {
		return nil, errors.New("garbagecollector: the cluster has no kind with an informer and a store")
	}
	g := &collector{kinds: map[string]kind{}, clock: c.Clock}
	for _, k := range ks {
		g.kinds[k.name()] = k
		g.order = append(g.order, k)
	}
	var rec reconcile.Reconciler[string] = g
	if o.Wrap != nil {
		rec = o.Wrap(rec)
	}
	var opts []reconcile.Option
	for _, k := range ks {
		opts = append(opts, k.(watcher).watch(g))
	}
	opts = append(opts,
		reconcile.WithWorkers(10), // kube-controller-manager's --concurrent-gc-syncs is 20
		reconcile.WithHeadBarrier(),
	)
	if clk, ok := c.Clock.(reconcile.Clock); ok {
		opts = append(opts, reconcile.WithClock(clk))
	}
	if c.Logger != nil {
		opts = append(opts, reconcile.WithLogger(c.Logger))
	}
	return reconcile.New(ControllerName, rec, append(opts, o.Controller...)...)
}

// watcher makes a kind's watch: its changes reconcile the object itself,
// its owners (a dependent gone may unblock a foreground deletion) and, when
// it is deleted or being deleted, its dependents.
type watcher interface {
	watch(g *collector) reconcile.Option
}

func (k *typed[V, P]) watch(g *collector) reconcile.Option {
	return reconcile.Watch(k.inf, func(key string, v V) []string {
		m := k.meta(&v)
		var keys []string
		if len(m.OwnerReferences) > 0 || m.Deleting() {
			keys = append(keys, gcKey(k.kindName, key))
		}
		for _, ref := range m.OwnerReferences {
			if ok, found := g.kinds[ref.Kind]; found {
				keys = append(keys, gcKey(ref.Kind, ownerKey(ok, m.Namespace, ref.Name)))
			}
		}
		// A change is given to toKeys for the value before and after: a
		// delete passes the last value. So the dependents of an object
		// that is going, or just went, are looked at.
		if m.Deleting() || k.gone(key, m.UID) {
			keys = append(keys, g.dependentKeys(selfID(k.kindName, key, *m))...)
		}
		return keys
	})
}

// gone: the cache no longer has key as uid (it was deleted or replaced).
func (k *typed[V, P]) gone(key, uid string) bool {
	v, ok := k.inf.Get(key)
	return !ok || k.meta(&v).UID != uid
}

func gcKey(kind, key string) string { return kind + "/" + key }

func splitGCKey(k string) (kind, key string) {
	kind, key, _ = strings.Cut(k, "/")
	return kind, key
}

// ownerKey is the store key of an owner named name, of kind k, referenced
// from an object in namespace ns: owners of a namespaced kind are in the
// dependent's namespace.
func ownerKey(k kind, ns, name string) string {
	if !k.namespaced() {
		return name
	}
	return api.Key(ns, name)
}

type collector struct {
	kinds map[string]kind
	order []kind
	clock clock.PassiveClock
}

// dependentKeys are the collector's keys of the objects, of every kind,
// with an owner reference to id (selfID of the owner).
func (g *collector) dependentKeys(id string) []string {
	var keys []string
	for _, k := range g.order {
		for _, key := range k.dependents(id) {
			keys = append(keys, gcKey(k.name(), key))
		}
	}
	return keys
}

// Reconcile looks at one object: as an owner being deleted with a policy
// to carry out, and as a dependent whose owners may be gone or going.
func (g *collector) Reconcile(ctx context.Context, gk string) (reconcile.Result, error) {
	kindName, key := splitGCKey(gk)
	k, ok := g.kinds[kindName]
	if !ok {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("garbagecollector: unknown kind in key %q", gk))
	}
	m, ok := k.get(key)
	if !ok {
		return reconcile.Result{}, nil
	}
	if m.Deleting() {
		switch {
		case m.HasFinalizer(api.FinalizerOrphan):
			return reconcile.Result{}, g.orphanDependents(ctx, k, key, m)
		case m.HasFinalizer(api.FinalizerForeground):
			return reconcile.Result{}, g.deleteForeground(ctx, k, key, m)
		}
		return reconcile.Result{}, nil // being deleted already
	}
	if len(m.OwnerReferences) == 0 {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, g.attemptToDelete(ctx, k, key, m)
}

// orphanDependents removes the owner's references from its dependents,
// then its orphan finalizer, which completes its deletion
// (garbagecollector.go orphanDependents).
func (g *collector) orphanDependents(ctx context.Context, k kind, key string, m api.ObjectMeta) error {
	var errs []error
	id := selfID(k.name(), key, m)
	for _, dk := range g.order {
		for _, dep := range dk.dependents(id) {
			dm, ok := dk.get(dep)
			if !ok {
				continue
			}
			errs = append(errs, dk.update(ctx, dep, dm.UID, func(d *api.ObjectMeta) error {
				d.OwnerReferences = slices.DeleteFunc(slices.Clone(d.OwnerReferences),
					func(r api.OwnerReference) bool { return refersTo(r, d.Namespace, k.name(), key, m) })
				return nil
			}))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return k.update(ctx, key, m.UID, func(o *api.ObjectMeta) error {
		o.RemoveFinalizer(api.FinalizerOrphan)
		return nil
	})
}

// deleteForeground removes the owner's foreground finalizer, which
// completes its deletion, once no dependent blocks it
// (garbagecollector.go processDeletingDependentsItem). Its dependents
// delete themselves (attemptToDelete sees their owner waiting).
func (g *collector) deleteForeground(ctx context.Context, k kind, key string, m api.ObjectMeta) error {
	id := selfID(k.name(), key, m)
	for _, dk := range g.order {
		for _, dep := range dk.dependents(id) {
			dm, ok := dk.get(dep)
			if !ok {
				continue
			}
			for _, r := range dm.OwnerReferences {
				if r.BlockOwnerDeletion && refersTo(r, dm.Namespace, k.name(), key, m) {
					return nil // blocked: its deletion reconciles this owner again
				}
			}
		}
	}
	return k.update(ctx, key, m.UID, func(o *api.ObjectMeta) error {
		o.RemoveFinalizer(api.FinalizerForeground)
		return nil
	})
}

// attemptToDelete classifies a dependent's owner references as solid
// (the owner exists), dangling (it does not, by the store) or waiting
// (it is being deleted in foreground), and acts (garbagecollector.go
// attemptToDeleteItem): a dependent with a solid owner only loses its
// other references; one whose owners all wait is deleted in foreground if
// it has dependents itself, so that the wait propagates; otherwise it is
// deleted.
func (g *collector) attemptToDelete(ctx context.Context, k kind, key string, m api.ObjectMeta) error {
	var solid, gone []string
	waiting := false
	for _, ref := range m.OwnerReferences {
		state, err := g.classify(ctx, m.Namespace, ref)
		if err != nil {
			return err
		}
		switch state {
		case refSolid:
			solid = append(solid, ownerID(ref, m.Namespace))
		case refWaiting:
			waiting = true
			gone = append(gone, ownerID(ref, m.Namespace))
		case refDangling:
			gone = append(gone, ownerID(ref, m.Namespace))
		}
	}
	switch {
	case len(solid) > 0:
		if len(gone) == 0 {
			return nil
		}
		return k.update(ctx, key, m.UID, func(d *api.ObjectMeta) error {
			if !slices.Equal(d.OwnerReferences, m.OwnerReferences) {
				return errChanged
			}
			d.OwnerReferences = slices.DeleteFunc(slices.Clone(d.OwnerReferences),
				func(r api.OwnerReference) bool { return slices.Contains(gone, ownerID(r, d.Namespace)) })
			return nil
		})
	case waiting && len(g.dependentKeys(selfID(k.name(), key, m))) > 0:
		return g.delete(ctx, k, key, m, true)
	default:
		return g.delete(ctx, k, key, m, false)
	}
}

type refState int

const (
	refSolid refState = iota
	refDangling
	refWaiting
)

// classify tells what became of the owner ref names, for a dependent in
// namespace ns. A cache that does not have the owner (or has a namesake)
// is checked against the store. An owner of a kind the cluster does not
// have counts as solid: nothing is known to be gone.
func (g *collector) classify(ctx context.Context, ns string, ref api.OwnerReference) (refState, error) {
	k, ok := g.kinds[ref.Kind]
	if !ok {
		return refSolid, nil
	}
	key := ownerKey(k, ns, ref.Name)
	o, ok := k.get(key)
	if !ok || o.UID != ref.UID {
		var err error
		if o, ok, err = k.getLive(ctx, key); err != nil {
			return refSolid, fmt.Errorf("garbagecollector: read owner %s %s: %w", ref.Kind, key, err)
		}
		if !ok || o.UID != ref.UID {
			return refDangling, nil
		}
	}
	if o.Deleting() && o.HasFinalizer(api.FinalizerForeground) {
		return refWaiting, nil
	}
	return refSolid, nil
}

// delete requests the deletion of key: in foreground, with the foreground
// finalizer, or else at once unless finalizers hold it. Only if it is
// still m, with the owner references it was judged by: a dependent just
// orphaned must not be deleted on what its owner was.
func (g *collector) delete(ctx context.Context, k kind, key string, m api.ObjectMeta, foreground bool) error {
	now := g.clock.Now().UTC()
	return k.update(ctx, key, m.UID, func(d *api.ObjectMeta) error {
		if d.Deleting() || !slices.Equal(d.OwnerReferences, m.OwnerReferences) {
			return errChanged
		}
		if foreground {
			d.AddFinalizer(api.FinalizerForeground)
		}
		d.DeletionRequested = now
		return nil
	})
}
