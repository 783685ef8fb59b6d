package reconcile

import (
	"fmt"
	"slices"

	"github.com/converge-go/converge/informer"
)

// OwnerIndex is the name of the index Owns adds to a child informer: its
// entries filed under their owner's key (see Owned).
const OwnerIndex = "converge.owner"

// Owns watches a child informer whose entries belong to the controller's
// keys: ownerOf names a child's owner (false: it has none), every change to
// a child reconciles its owner (for an update, the old owner and the new
// one, so that a child that changes hands is seen by both), and the child
// informer gets an index, OwnerIndex, so that Owned lists an owner's
// children from the cache. A change no predicate drops is delivered as
// Watch delivers it: ownerOf and the predicates run on the informer's
// delivery goroutine, must be quick, and a panic in one is recovered,
// logged and counted.
//
// ownerOf must be a pure function of the child's key and value (the index
// recomputes it to unfile a changed child). Owner keys are filed as
// themselves if K is string, else as fmt.Sprint(owner), which must tell
// owners apart.
//
// New fails if child or ownerOf is nil, a predicate is nil, K is not the
// controller's key type, or child already has an index named OwnerIndex
// (one owner relation per child informer, as Kubernetes has one
// controlling owner reference; another controller's Owns on the same
// informer is a second relation). The index is added when New succeeds,
// before or while child runs (informer.AddIndex).
//
// Owns is the other direction from ByIndex: Owns maps a child to the key
// that owns it, ByIndex maps a referenced object (a node, a config) to the
// primary keys that refer to it, through an index on the primary. They
// compose: For(rs), Owns(pods, podOwner), Watch(nodes, ByIndex(rsInf, ...)).
func Owns[K comparable, CK comparable, CV any](child *informer.Informer[CK, CV], ownerOf func(key CK, v CV) (owner K, ok bool), preds ...Predicate[CK, CV]) Option {
	return func(s *settings) error {
		if child == nil || ownerOf == nil {
			return fmt.Errorf("Owns: nil informer or owner function")
		}
		if i := slices.IndexFunc(preds, func(p Predicate[CK, CV]) bool { return p == nil }); i >= 0 {
			return fmt.Errorf("Owns(informer %q): predicate %d is nil", child.Name(), i)
		}
		if slices.Contains(s.owned, any(child)) || child.HasIndex(OwnerIndex) {
			return fmt.Errorf("Owns(informer %q): it has an owner index already (one Owns per child informer)", child.Name())
		}
		s.owned = append(s.owned, child)
		toKeys := func(key CK, v CV) []K {
			if owner, ok := ownerOf(key, v); ok {
				return []K{owner}
			}
			return nil
		}
		s.watches = append(s.watches, &informerWatch[K, CK, CV]{inf: child, toKeys: toKeys, preds: preds})
		s.commits = append(s.commits, func() error {
			err := child.AddIndex(OwnerIndex, func(key CK, v CV) []string {
				if owner, ok := ownerOf(key, v); ok {
					return []string{ownerValue(owner)}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("Owns: %w", err)
			}
			return nil
		})
		return nil
	}
}

// Owned returns the children of owner in child's cache: the entries whose
// owner, by the ownerOf given to Owns, is owner; none if it has none, in no
// particular order. It panics if child was not given to Owns of a
// controller that New accepted (it has no OwnerIndex), like
// informer.Informer.ByIndex for an unknown index: an empty answer would
// hide the mistake. The values are shared with the cache: treat them as
// read-only.
func Owned[K comparable, CK comparable, CV any](child *informer.Informer[CK, CV], owner K) []informer.Entry[CK, CV] {
	if !child.HasIndex(OwnerIndex) {
		panic(fmt.Sprintf("reconcile.Owned: informer %q has no owner index: give it to reconcile.Owns", child.Name()))
	}
	return child.ByIndex(OwnerIndex, ownerValue(owner))
}

// ownerValue is how an owner key is filed in OwnerIndex.
func ownerValue[K comparable](owner K) string {
	if s, ok := any(owner).(string); ok {
		return s
	}
	return fmt.Sprint(owner)
}
