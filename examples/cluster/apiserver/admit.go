package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// admission defaults and validates every write of one kind, wherever it
// comes from: the HTTP API (through httpstore's hooks, which answer 422)
// and the controllers of the control plane, which write to the stores
// directly (through Admitted's stores).
type admission struct {
	tolerationSeconds int64
	clock             clock.PassiveClock
}

// admit returns v defaulted (api.Default, and the name and namespace of
// the key where v has none), or an error if it is invalid or does not
// match its key.
func admit[V any](a admission, key string, v V) (V, error) {
	obj := any(&v)
	m := api.MetaOf(obj)
	if m == nil {
		return v, nil // events: no rules
	}
	ns, name := api.SplitKey(key)
	if m.Name == "" {
		m.Name = name
	}
	if _, node := obj.(*api.Node); !node && m.Namespace == "" {
		m.Namespace = ns
	}
	api.Default(obj, a.tolerationSeconds)
	if err := api.Validate(obj); err != nil {
		return v, err
	}
	if got := m.Key(); got != key {
		return v, fmt.Errorf("the object's key %q (metadata.namespace/metadata.name) does not match the key it is written at, %q", got, key)
	}
	return v, nil
}

// Admitted returns st with every Create and Update of an object defaulted
// and validated as the HTTP API does it, given a UID and a
// creationTimestamp (from c) on create if it has none, and, for a
// Deployment or ReplicaSet, generation 1; an update keeps the stored UID,
// creationTimestamp and deletion request, and keeps the generation or
// bumps it on a spec change (see Update), as the Kubernetes API server
// keeps metadata. A refused write
// returns the *api.InvalidError and writes nothing. The events store is
// returned as is. tolerationSeconds is the pods' default not-ready and
// unreachable toleration (api.Default).
func Admitted(st api.Stores, tolerationSeconds int64, c clock.PassiveClock) api.Stores {
	a := admission{tolerationSeconds: tolerationSeconds, clock: c}
	return api.Stores{
		Deployments: admitted[api.Deployment]{st.Deployments, a},
		ReplicaSets: admitted[api.ReplicaSet]{st.ReplicaSets, a},
		Pods:        admitted[api.Pod]{st.Pods, a},
		Nodes:       admitted[api.Node]{st.Nodes, a},
		Leases:      admitted[api.Lease]{st.Leases, a},
		Events:      st.Events,
	}
}

type admitted[V any] struct {
	informer.Store[string, V]
	a admission
}

func (s admitted[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	v, err := admit(s.a, key, v)
	if err != nil {
		return 0, err
	}
	m := api.MetaOf(&v)
	if m.UID == "" {
		m.UID = api.NewUID()
	}
	if m.CreationTimestamp.IsZero() {
		m.CreationTimestamp = s.a.clock.Now().UTC().Truncate(time.Second)
	}
	if _, ok := any(&v).(specObject); ok {
		m.Generation = 1
	}
	return s.Store.Create(ctx, key, v)
}

// specObject is a kind whose generation counts its spec's changes.
type specObject interface{ ObjectSpec() any }

// Update keeps what the API server keeps of the stored object, whatever
// the writer sent: its UID, creationTimestamp and deletion request, and
// for a Deployment or ReplicaSet its generation, bumped when the spec
// changed (pkg/registry/apps/deployment/strategy.go PrepareForUpdate). The
// read costs nothing in consistency: the write is at rev, so it fails
// unless what was read is what it replaces.
func (s admitted[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	v, err := admit(s.a, key, v)
	if err != nil {
		return 0, err
	}
	old, oldRev, ok, err := s.Store.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if !ok || oldRev != rev {
		return 0, fmt.Errorf("update %s at revision %d: %w", key, rev, informer.ErrConflict)
	}
	m, om := api.MetaOf(&v), api.MetaOf(&old)
	m.UID, m.CreationTimestamp = om.UID, om.CreationTimestamp
	if !om.DeletionRequested.IsZero() {
		m.DeletionRequested = om.DeletionRequested
	}
	if so, ok := any(&v).(specObject); ok {
		m.Generation = om.Generation
		// As stored: a nil and an empty map are the same spec.
		a, _ := json.Marshal(so.ObjectSpec())
		b, _ := json.Marshal(any(&old).(specObject).ObjectSpec())
		if !bytes.Equal(a, b) {
			m.Generation++
		}
	}
	return s.Store.Update(ctx, key, v, rev)
}
