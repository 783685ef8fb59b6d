// Package object holds what converge's write helpers need to know about a
// stored value: its metadata (generation, finalizers, a deletion request)
// and its conditions.
//
// A value type opts in by embedding Meta, unnamed and untagged:
//
//	type Thing struct {
//		object.Meta
//		Spec   ThingSpec   `json:"spec"`
//		Status ThingStatus `json:"status"`
//	}
//
// Meta's fields are then promoted into the value's JSON (generation,
// finalizers, deletionRequested sit beside spec and status), so a value
// that had a top-level "generation" keeps its stored form, and *Thing
// implements Object. Types without Meta are unaffected by everything here.
//
// A value that also says what its spec is implements SpecObject,
//
//	func (t *Thing) ObjectSpec() any { return t.Spec }
//
// and informer's write helpers then keep its Generation as the Kubernetes
// API server does: bumped on a spec change, never on a status write.
//
// A controller keeps its finalizer with informer.Finalize, which adds it
// before the controller acts and removes it once the controller has
// cleaned up after a deletion request (informer.RequestDelete); Meta's
// AddFinalizer and RemoveFinalizer are the steps it takes.
//
// Values read from a store may be shared with the store and with informer
// caches. Every helper here is therefore copy-on-write: it never writes
// into a slice it was given, it replaces the slice. Call them on a copy of
// the value (informer.Update passes one to its mutate function) and the
// value the store shares is left as it was.
//
// The package imports only the standard library, so that informer can
// depend on it.
package object
