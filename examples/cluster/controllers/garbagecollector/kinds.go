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

// indexOwnerUID files every object under the UIDs its owner references
// name: an owner's dependents, of one kind, are ByIndex(indexOwnerUID, uid).
const indexOwnerUID = ControllerName + ".owner-uid"

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
	dependents(uid string) []string
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

func (k *typed[V, P]) dependents(uid string) []string {
	var keys []string
	for _, e := range k.inf.ByIndex(indexOwnerUID, uid) {
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
			refs := meta(&v).OwnerReferences
			uids := make([]string, 0, len(refs))
			for _, r := range refs {
				uids = append(uids, r.UID)
			}
			return uids
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
		err = errors.Join(err, add(newKind[api.Node]("Node", false, c.Informers.Nodes, c.Stores.Nodes,
			func(v *api.Node) *api.ObjectMeta { return &v.Metadata })))
	}
	if c.Informers.Leases != nil && c.Stores.Leases != nil {
		err = errors.Join(err, add(newKind[api.Lease]("Lease", true, c.Informers.Leases, c.Stores.Leases,
			func(v *api.Lease) *api.ObjectMeta { return &v.Metadata })))
	}
	return out, err
}
