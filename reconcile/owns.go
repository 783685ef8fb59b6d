package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/converge-go/converge/informer"
)

// OwnerIndex is the prefix of the indexes Owns adds to child informers:
// a controller's index is named OwnerIndexOf(its name).
const OwnerIndex = "converge.owner"

// OwnerIndexOf returns the name of the index that Owns adds to a child
// informer for the controller named controller: OwnerIndex, a slash, and
// the controller's name. Its entries are filed under their owner's key (see
// OwnedBy); ByIndex on it is what OwnedBy does.
func OwnerIndexOf(controller string) string { return OwnerIndex + "/" + controller }

// Owns watches a child informer whose entries belong to the controller's
// keys: ownerOf names a child's owner (false: it has none), every change to
// a child reconciles its owner (for an update, the old owner and the new
// one, so that a child that changes hands is seen by both), and the child
// informer gets an index, OwnerIndexOf(the controller's name), so that
// Owned and OwnedBy list an owner's children from the cache. A change no
// predicate drops is delivered as Watch delivers it: ownerOf and the
// predicates run on the informer's delivery goroutine, must be quick, and
// a panic in one is recovered, logged and counted.
//
// ownerOf must be a pure function of the child's key and value (the index
// recomputes it to unfile a changed child). Owner keys are filed as
// themselves if K is string, else as fmt.Sprint(owner), which must tell
// owners apart.
//
// Any number of controllers may own one child informer, each through its
// own index and its own ownerOf (a pod may belong to a ReplicaSet for one
// controller and to a Job for another); one controller owns an informer
// once. New fails if child or ownerOf is nil, a predicate is nil, K is not
// the controller's key type, child is given to two Owns of one New, or
// child has an index named OwnerIndexOf(the controller's name) already
// (another live controller of the same name owns it). The index is added
// when New succeeds, before or while child runs (informer.AddIndex), and
// removed again if New fails after adding it.
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
		if slices.ContainsFunc(s.owned, func(r ownsRelation) bool { return r.child == any(child) }) {
			return fmt.Errorf("Owns(informer %q): the controller owns it twice (one Owns per child informer and controller)", child.Name())
		}
		toKeys := func(key CK, v CV) []K {
			if owner, ok := ownerOf(key, v); ok {
				return []K{owner}
			}
			return nil
		}
		s.watches = append(s.watches, &informerWatch[K, CK, CV]{inf: child, toKeys: toKeys, preds: preds})
		s.owned = append(s.owned, ownsRelation{
			child: child,
			check: func(controller string) error {
				if name := OwnerIndexOf(controller); child.HasIndex(name) {
					return fmt.Errorf("Owns(informer %q): it has an index named %q already (is another controller named %q alive?)",
						child.Name(), name, controller)
				}
				return nil
			},
			add: func(controller string) (undo func(), err error) {
				name := OwnerIndexOf(controller)
				err = child.AddIndex(name, func(key CK, v CV) []string {
					if owner, ok := ownerOf(key, v); ok {
						return []string{ownerValue(owner)}
					}
					return nil
				})
				if err != nil {
					return nil, fmt.Errorf("Owns: %w", err)
				}
				return func() { child.RemoveIndex(name) }, nil
			},
		})
		return nil
	}
}

// ownsRelation is one Owns, checked and then applied by New.
type ownsRelation struct {
	child any // the child informer
	// check reports, before New changes anything, why add would fail.
	check func(controller string) error
	// add adds the owner index and returns how to take it away again.
	add func(controller string) (undo func(), err error)
}

// Owned returns the children of owner in child's cache, where child is
// owned by one controller only: the entries whose owner, by the ownerOf
// given to that controller's Owns, is owner; none if it has none, in no
// particular order. It panics if child was not given to Owns of a
// controller that New accepted (it has no owner index), like
// informer.Informer.ByIndex for an unknown index, or if several
// controllers own child (use OwnedBy): an empty or mixed answer would hide
// the mistake. A controller that New accepted owns child for as long as
// child exists, whether or not the controller still runs.
//
// The values are shared with the cache: treat them as read-only. Each
// entry carries the revision its value was written at (Entry.Revision),
// so that a reconciler can delete or update a child only if nobody changed
// it since the cache saw it, and retry on informer.ErrConflict:
//
//	for _, e := range reconcile.Owned(pods, rs) {
//		if surplus(e.Value) {
//			_, err := podStore.Delete(ctx, e.Key, e.Revision)
//			...
//		}
//	}
//
// It panics if child has no owner index (it was not given to
// reconcile.Owns) or is owned by several controllers (use OwnedBy): both
// are programming errors, and the call sits in every reconcile.
func Owned[K comparable, CK comparable, CV any](child *informer.Informer[CK, CV], owner K) []informer.Entry[CK, CV] {
	owners := ownersOf(child)
	switch len(owners) {
	case 0:
		panic(fmt.Sprintf("reconcile.Owned: informer %q has no owner index: give it to reconcile.Owns", child.Name()))
	case 1:
		return child.ByIndex(OwnerIndexOf(owners[0]), ownerValue(owner))
	}
	slices.Sort(owners)
	panic(fmt.Sprintf("reconcile.Owned: informer %q is owned by the controllers %q: use reconcile.OwnedBy to name one",
		child.Name(), owners))
}

// OwnedBy is Owned for a child informer that several controllers own: it
// returns the children of owner by the ownerOf given to the Owns of the
// controller named controller. It panics if that controller does not own
// child.
func OwnedBy[K comparable, CK comparable, CV any](child *informer.Informer[CK, CV], controller string, owner K) []informer.Entry[CK, CV] {
	name := OwnerIndexOf(controller)
	if !child.HasIndex(name) {
		panic(fmt.Sprintf("reconcile.OwnedBy: informer %q has no owner index for controller %q: give it to that controller's reconcile.Owns",
			child.Name(), controller))
	}
	return child.ByIndex(name, ownerValue(owner))
}

// ownersOf returns the names of the controllers that own child: those of
// its owner indexes. The child informer is what knows them, so that
// nothing outlives it and every Manager of a process sees only its own.
func ownersOf[CK comparable, CV any](child *informer.Informer[CK, CV]) []string {
	var owners []string
	for _, name := range child.IndexNames() {
		if c, ok := strings.CutPrefix(name, OwnerIndex+"/"); ok {
			owners = append(owners, c)
		}
	}
	return owners
}

// ownerValue is how an owner key is filed in OwnerIndex.
func ownerValue[K comparable](owner K) string {
	if s, ok := any(owner).(string); ok {
		return s
	}
	return fmt.Sprint(owner)
}
