package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// indexOwnerUID files every object under its owners, each as ownerID
// names it: an owner's dependents, of one kind, are
// ByIndex(indexOwnerUID, selfID(owner)).
const indexOwnerUID = ControllerName + ".owner-uid"

// clusterScoped are the kinds whose objects have no namespace.
var clusterScoped = map[string]bool{"Node": true}

// ownerID names the owner a reference from an object in namespace ns
// points at: its UID, or, for a reference without one (the API server
// should set every object's UID, but a test or a hand-written object may
// not), its kind and key, so that two owners without UIDs are never
// taken for one.
func ownerID(r api.OwnerReference, ns string) string {
	if r.UID != "" {
		return "uid:" + r.UID
	}
	if clusterScoped[r.Kind] {
		ns = ""
	}
	return "name:" + r.Kind + "/" + api.Key(ns, r.Name)
}

// selfID is the ownerID that references to the object m of kind at key
// have.
func selfID(kind, key string, m api.ObjectMeta) string {
	if m.UID != "" {
		return "uid:" + m.UID
	}
	return "name:" + kind + "/" + key
}

// refersTo reports whether r, a reference of an object in namespace ns,
// names the object m of kind at key.
func refersTo(r api.OwnerReference, ns, kind, key string, m api.ObjectMeta) bool {
	return ownerID(r, ns) == selfID(kind, key, m)
}

// errGone: the object at the key is another than the one decided on (a
// namesake with another UID); errChanged: it changed since (its change
// reconciles it again).
var (
	errGone    = errors.New("replaced by a namesake")
	errChanged = errors.New("changed since it was read")
)

// kind is what the collector needs of one kind of object, whatever its Go
// type: reads from the cache (and, to tell a missing owner for sure, from
// the store), its dependents by owner UID, and the writes it makes.
type kind interface {
	name() string
	namespaced() bool
	get(key string) (api.ObjectMeta, bool)
	// getLive reads the store, not the cache: a cache that lags must not
	// make an owner look gone.
	getLive(ctx context.Context, key string) (api.ObjectMeta, bool, error)
	// dependents are the keys of the objects whose owner references
	// name id (selfID of the owner).
	dependents(id string) []string
	// update changes the metadata of key if it is still uid's, with the
	// write helpers' rules: an object left Deleting without finalizers is
	// deleted.
	// mutate returning errChanged writes nothing, and is no error.
	update(ctx context.Context, key, uid string, mutate func(m *api.ObjectMeta) error) error
	informer() any
}

// typed is a kind over its informer and store.
type typed[V any, P interface {
	*V
	object.Object
}] struct {
	kindName string
	ns       bool
	inf      *informer.Informer[string, V]
	store    informer.ReadWriter[string, V]
	meta     func(*V) *api.ObjectMeta
}

func (k *typed[V, P]) name() string     { return k.kindName }
func (k *typed[V, P]) namespaced() bool { return k.ns }
func (k *typed[V, P]) informer() any    { return k.inf }

func (k *typed[V, P]) get(key string) (api.ObjectMeta, bool) {
	v, ok := k.inf.Get(key)
	if !ok {
		return api.ObjectMeta{}, false
	}
	return *k.meta(&v), true
}

func (k *typed[V, P]) getLive(ctx context.Context, key string) (api.ObjectMeta, bool, error) {
	v, _, ok, err := k.store.Get(ctx, key)
	if err != nil || !ok {
		return api.ObjectMeta{}, false, err
	}
	return *k.meta(&v), true, nil
}

func (k *typed[V, P]) dependents(id string) []string {
	var keys []string
	for _, e := range k.inf.ByIndex(indexOwnerUID, id) {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return keys
}

func (k *typed[V, P]) update(ctx context.Context, key, uid string, mutate func(m *api.ObjectMeta) error) error {
	_, _, err := informer.Update(ctx, k.store, key, func(v *V) error {
		m := k.meta(v)
		if m.UID != uid {
			return errGone
		}
		return mutate(m)
	})
	if errors.Is(err, informer.ErrNotFound) || errors.Is(err, errGone) || errors.Is(err, errChanged) {
		return nil // gone already: nothing left to do to it
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", k.kindName, key, err)
	}
	return nil
}

// newKind makes the kind of an informer and store, and adds the owner
// index to the informer.
func newKind[V any, P interface {
	*V
	object.Object
}](name string, namespaced bool, inf *informer.Informer[string, V], store informer.ReadWriter[string, V],
	meta func(*V) *api.ObjectMeta) (kind, error) {
	k := &typed[V, P]{kindName: name, ns: namespaced, inf: inf, store: store, meta: meta}
	if !inf.HasIndex(indexOwnerUID) {
		if err := inf.AddIndex(indexOwnerUID, func(_ string, v V) []string {
			m := meta(&v)
			ids := make([]string, 0, len(m.OwnerReferences))
			for _, r := range m.OwnerReferences {
				ids = append(ids, ownerID(r, m.Namespace))
			}
			return ids
		}); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// kinds are the cluster's kinds the collector follows: every one with an
// informer and a store.
func kinds(c *api.Cluster) ([]kind, error) {
	var out []kind
	add := func(k kind, err error) error {
		if err != nil {
			return err
		}
		out = append(out, k)
		return nil
	}
	var err error
	if c.Informers.Deployments != nil && c.Stores.Deployments != nil {
		err = errors.Join(err, add(newKind[api.Deployment]("Deployment", true, c.Informers.Deployments, c.Stores.Deployments,
			func(v *api.Deployment) *api.ObjectMeta { return &v.Metadata })))
	}
	if c.Informers.ReplicaSets != nil && c.Stores.ReplicaSets != nil {
		err = errors.Join(err, add(newKind[api.ReplicaSet]("ReplicaSet", true, c.Informers.ReplicaSets, c.Stores.ReplicaSets,
			func(v *api.ReplicaSet) *api.ObjectMeta { return &v.Metadata })))
	}
	if c.Informers.Pods != nil && c.Stores.Pods != nil {
		err = errors.Join(err, add(newKind[api.Pod]("Pod", true, c.Informers.Pods, c.Stores.Pods,
			func(v *api.Pod) *api.ObjectMeta { return &v.Metadata })))
	}
	if c.Informers.Nodes != nil && c.Stores.Nodes != nil {
		err = errors.Join(err, add(newKind[api.Node]("Node", !clusterScoped["Node"], c.Informers.Nodes, c.Stores.Nodes,
			func(v *api.Node) *api.ObjectMeta { return &v.Metadata })))
	}
	if c.Informers.Leases != nil && c.Stores.Leases != nil {
		err = errors.Join(err, add(newKind[api.Lease]("Lease", true, c.Informers.Leases, c.Stores.Leases,
			func(v *api.Lease) *api.ObjectMeta { return &v.Metadata })))
	}
	return out, err
}
