package informer

import (
	"context"
	"errors"
)

// Revision is a store's version of its data: every change gets a higher
// one. It is opaque to the informer, which only hands back to Watch the
// last one it saw. etcd's mod revision, a PostgreSQL sequence and the memory
// store's counter all fit; a store with no versions of its own (see package
// poll) counts its lists.
type Revision uint64

// Entry is one key and its value, as listed.
type Entry[K comparable, V any] struct {
	Key   K
	Value V
	// Revision is the revision the key's value was last written at (its
	// mod revision), if the Source knows it; 0 means the revision of the
	// list. The informer's own List and ByIndex fill it with the key's
	// cached revision: that of the last change of the key it took (a bad
	// value's included, see BadKey), which is the mod revision when the
	// Source lists it or a watch brought it, so that a caller can make a
	// write conditional on it (ReadWriter.Update and Delete). After a list
	// from a Source that gives none it is the list's revision, on which
	// such a write fails with ErrConflict until the key's next change.
	Revision Revision
	// Err, if not nil, says the store holds a value for Key that the
	// Source could not decode (or otherwise take); Value is then unset,
	// and Revision should be the bad value's, if the Source knows it.
	// The informer keeps the key's last good value, if it has one, and
	// marks the key bad (see BadKey); it never deletes a key because of
	// Err. The informer's own entries never have Err set.
	Err error
}

// EventType says what an Event is.
type EventType uint8

const (
	// Put: Key now has Value (created or changed).
	Put EventType = iota + 1
	// Delete: Key is gone. Value is the last value if the store knows it,
	// else the zero V: the informer delivers its own last known value.
	Delete
	// Bookmark: nothing changed up to Revision. It lets a source that
	// watches a busy store with a narrow filter advance the revision the
	// informer would resume from, so that a restarted watch does not start
	// behind compaction.
	Bookmark
)

func (t EventType) String() string {
	switch t {
	case Put:
		return "Put"
	case Delete:
		return "Delete"
	case Bookmark:
		return "Bookmark"
	}
	return "EventType(?)"
}

// Event is one change from Watch.
type Event[K comparable, V any] struct {
	Type     EventType
	Key      K // unset for Bookmark
	Value    V // unset for Bookmark; see Delete
	Revision Revision
	// Err, on a Put only, says the store's value for Key at Revision
	// could not be decoded (or otherwise taken); Value is then unset. The
	// informer keeps the key's last good value and marks the key bad
	// until a later Put of it decodes or a Delete removes it. A Source
	// must send such a Put rather than fail its watch: a watch that fails
	// at a bad value resumes below it and fails again, and every other
	// key waits behind it.
	Err error
}

// ErrRevisionExpired is returned by Source.Watch when the revision it was
// asked to start after is no longer available (compacted, or from before a
// restart that lost history). The informer lists again and synthesises
// deletes for keys that vanished in between.
var ErrRevisionExpired = errors.New("informer: revision expired")

// Source is a store the informer can follow: a list of everything, then the
// changes after it. Writing one for a new store is a page of code; see the
// package example.
//
// The contract:
//
//   - List returns every entry and the revision they were read at, as one
//     consistent snapshot: any change after it has a higher revision.
//   - Watch(ctx, after, emit) calls emit for every change with a revision
//     greater than after, in revision order, from the goroutine that called
//     Watch, and blocks until ctx is done (it then returns ctx.Err()) or the
//     watch fails. Changes sharing a revision (one transaction) may come in
//     any order among themselves. A source may send the same change twice
//     (after a reconnect, say), never an older one after a newer one for a
//     key.
//   - If after is no longer available, Watch returns an error that
//     errors.Is ErrRevisionExpired, before or after emitting events.
//   - Any other error ends the watch; the informer backs off and calls Watch
//     again after the last revision it saw. So a source need not retry
//     itself, and should not hide lost changes: returning an error is
//     always safe.
//   - A value the Source cannot decode is an Entry or a Put with Err set
//     (its Key and Revision as for a good value, its Value unset), never a
//     failed List or Watch: one bad value must not stop the stream for
//     every other key, and a watch that failed at it would resume below it
//     and fail again (see Entry.Err and Event.Err). Its key stays listed
//     while the store has it. A Delete of a key whose last value was bad
//     may carry the zero V.
//   - If emit returns an error, Watch returns it. emit returns once the
//     change is buffered, before the informer has applied it; it waits
//     while the informer's buffer is full (see WaitApplied).
//   - List and Watch may be called again at any time, also concurrently
//     with each other (a relist while an old watch is still stopping).
type Source[K comparable, V any] interface {
	List(ctx context.Context) (entries []Entry[K, V], rev Revision, err error)
	Watch(ctx context.Context, after Revision, emit func(Event[K, V]) error) error
}
