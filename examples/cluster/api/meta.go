// Package api holds the cluster example's object kinds — Deployment,
// ReplicaSet, Pod, Node and Lease — with the field names Kubernetes gives
// them, and what every controller and process of the example shares: the
// stores of each kind, their informers and indexes, and the timings.
//
// Each kind lives in its own store, keyed "namespace/name" (a Node's key is
// its name: nodes are not namespaced). The stores are those the control
// plane owns (the embedded store, etcd or PostgreSQL), or httpstore clients
// of the control plane in the other processes (node agents, the CLI).
package api

import (
	"strings"
	"time"

	"github.com/converge-go/converge/object"
)

// ObjectMeta is the metadata every kind carries under "metadata", as in
// Kubernetes. It embeds object.Meta, so converge's write helpers keep its
// generation, finalizers and deletion request (informer.Update,
// informer.RequestDelete, informer.Finalize); through it a pointer to every
// kind is an object.Object.
type ObjectMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// UID tells apart two objects that had the same name at different
	// times; an owner reference names its owner's UID, so that a pod
	// never belongs to a new ReplicaSet of the same name.
	UID               string            `json:"uid,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	OwnerReferences   []OwnerReference  `json:"ownerReferences,omitempty"`
	CreationTimestamp time.Time         `json:"creationTimestamp,omitzero"`
	object.Meta
}

// Metadata is the name under which every kind embeds its ObjectMeta. A
// kind cannot embed ObjectMeta under its own name: a field named
// ObjectMeta would hide the ObjectMeta method that object.Meta promotes,
// and a pointer to the kind would not be an object.Object (no finalizers,
// no deletion request, no generation kept by informer's write helpers).
type Metadata = ObjectMeta

// Key is the object's key in its kind's store: "namespace/name", or the
// name alone for a kind that is not namespaced.
func (m ObjectMeta) Key() string { return Key(m.Namespace, m.Name) }

// Key builds a store key from a namespace and a name.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitKey is the inverse of Key.
func SplitKey(key string) (namespace, name string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// OwnerReference names an object's owner, as Kubernetes' does. At most one
// reference of an object has Controller set: the owner that manages it.
type OwnerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Controller bool   `json:"controller,omitempty"`
	// BlockOwnerDeletion makes a foreground deletion of the owner wait
	// for this object to be gone.
	BlockOwnerDeletion bool `json:"blockOwnerDeletion,omitempty"`
}

// ControllerOf returns the reference of m's managing owner, if it has one.
func ControllerOf(m ObjectMeta) (OwnerReference, bool) {
	for _, r := range m.OwnerReferences {
		if r.Controller {
			return r, true
		}
	}
	return OwnerReference{}, false
}

// LabelSelector selects objects by labels: every MatchLabels pair must be
// present. An empty selector selects nothing (a Deployment or ReplicaSet
// must say which pods are its own).
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// Matches reports whether labels satisfy the selector. An empty selector
// matches nothing.
func (s LabelSelector) Matches(labels map[string]string) bool {
	if len(s.MatchLabels) == 0 {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
