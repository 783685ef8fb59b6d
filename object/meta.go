package object

import (
	"slices"
	"time"
)

// Meta is the metadata converge's helpers read and write. Embed it unnamed
// and untagged in a value type: its fields are then inlined in the value's
// JSON and its ObjectMeta method makes a pointer to the value an Object.
//
// The zero Meta is a live object without finalizers at generation 0.
type Meta struct {
	// Generation counts changes to the desired state; status writes do
	// not move it, so that a controller can record in a condition's
	// ObservedGeneration which spec it acted on. For a value that
	// implements SpecObject, informer's write helpers keep it, as the
	// Kubernetes API server does (see SpecObject); for any other value,
	// whoever writes the spec bumps it.
	Generation int64 `json:"generation,omitempty"`
	// Finalizers name the cleanups still due before the key may be
	// deleted. While the list is not empty informer.RequestDelete only
	// marks the key (DeletionRequested) and informer.Update never deletes
	// it; the Update that removes the last finalizer of a deleting key
	// deletes it.
	Finalizers []string `json:"finalizers,omitempty"`
	// DeletionRequested is when deletion was first requested, the zero
	// time if it never was. Set once by informer.RequestDelete, never
	// cleared: a deletion cannot be taken back.
	DeletionRequested time.Time `json:"deletionRequested,omitzero"`
}

// Object is a value whose metadata converge's helpers can reach. A pointer
// to any struct that embeds Meta implements it through the promoted method.
type Object interface {
	// ObjectMeta returns the value's metadata, to read or change in place.
	ObjectMeta() *Meta
}

// SpecObject is an Object that tells its spec (what its writers want)
// apart from its status (what a controller observed) and its Meta, so
// that informer.Update, CreateOrUpdate and RequestDelete keep its
// Generation as the Kubernetes API server keeps metadata.generation; a
// mutate function's own change to Generation is discarded:
//
//   - a create (CreateOrUpdate of an absent key) sets it to 1;
//   - a write whose ObjectSpec, after mutate, is not reflect.DeepEqual to
//     the ObjectSpec of the value read (a spec change) sets it to the
//     Generation read plus 1;
//   - RequestDelete's write that marks a value with finalizers
//     (DeletionRequested) adds 1 too, as the API server does on a graceful
//     deletion: it changes what is wanted of the controllers;
//   - every other write (status, finalizers, conditions, anything outside
//     the spec) keeps the Generation read.
//
// The comparison is reflect.DeepEqual, so a nil and an empty slice or map
// differ, and a time.Time with a monotonic clock reading differs from the
// same instant read back from a store: keep such times in UTC (t.UTC()).
// Raw store writes (Put, Store.Update) and writers outside Go (SQL) keep
// Generation themselves.
//
// A struct that embeds Meta and holds its spec in a field Spec implements
// it with:
//
//	func (t *Thing) ObjectSpec() any { return t.Spec }
type SpecObject interface {
	Object
	// ObjectSpec returns the value's spec: what is compared between two
	// versions of the value. It must not return the status.
	ObjectSpec() any
}

// ObjectMeta returns m itself; embedding Meta promotes it, so that a
// pointer to the embedding value is an Object.
func (m *Meta) ObjectMeta() *Meta { return m }

// Deleting reports whether deletion has been requested: the key will be
// deleted once its last finalizer is removed.
func (m Meta) Deleting() bool { return !m.DeletionRequested.IsZero() }

// HasFinalizer reports whether name is among the finalizers.
func (m Meta) HasFinalizer(name string) bool { return slices.Contains(m.Finalizers, name) }

// AddFinalizer appends name to the finalizers and reports whether it did.
// It does nothing and returns false if name is already there, or if the
// object is Deleting: a cleanup registered after deletion was requested
// could keep the key forever, and whoever adds it has not acted yet, so
// there is nothing to clean up.
//
// It sets Finalizers to a new slice and never writes into the old one,
// which a store or cache may share.
func (m *Meta) AddFinalizer(name string) bool {
	if m.Deleting() || m.HasFinalizer(name) {
		return false
	}
	fins := make([]string, len(m.Finalizers), len(m.Finalizers)+1)
	copy(fins, m.Finalizers)
	m.Finalizers = append(fins, name)
	return true
}

// RemoveFinalizer removes every occurrence of name from the finalizers and
// reports whether there was one. It sets Finalizers to a new slice (nil if
// none is left) and never writes into the old one, which a store or cache
// may share.
func (m *Meta) RemoveFinalizer(name string) bool {
	if !m.HasFinalizer(name) {
		return false
	}
	var fins []string
	for _, f := range m.Finalizers {
		if f != name {
			fins = append(fins, f)
		}
	}
	m.Finalizers = fins
	return true
}
