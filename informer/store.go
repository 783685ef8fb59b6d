package informer

import (
	"context"
	"errors"
)

// ErrConflict is wrapped by every write of a ReadWriter that did not happen
// because the key was not as the write required: Create of a key that
// exists, Update of a key that changed since the revision given (or is
// gone), Delete at a revision the key is no longer at (or of a key that is
// gone). Nothing was written; read again and retry. Every backend's
// conflict matches it with errors.Is.
var ErrConflict = errors.New("informer: revision conflict")

// ErrNotFound is wrapped by helpers that need a key to exist and found none.
// ReadWriter.Get reports absence with its ok result instead.
var ErrNotFound = errors.New("informer: key not found")

// ReadWriter reads keys with their mod revision and writes them with
// compare-and-swap, so that a controller can write back what it decided
// without losing a concurrent change.
//
// The contract, for every implementation:
//
//   - Every method is safe for concurrent use.
//   - A write returns the revision it was made at: the Revision of the Event
//     that the store's Source emits for that change, and the mod revision a
//     later Get returns, so that a caller can wait for an informer to have
//     it (Informer.WaitForRevision).
//   - A write that fails with an error wrapping ErrConflict wrote nothing.
//     Any other error leaves the outcome unknown (a write may have committed
//     as the context expired): read again.
//   - A context done before the call makes every method return an error
//     that errors.Is ctx.Err(), having written nothing.
//   - Values may be shared with the store and its readers: treat what Get
//     returns, and what was written, as read-only.
type ReadWriter[K comparable, V any] interface {
	// Get returns key's value and its mod revision (the revision of the
	// write that set it, above 0), or ok false and a nil error if key does
	// not exist. It sees every write that returned before it was called.
	Get(ctx context.Context, key K) (v V, rev Revision, ok bool, err error)
	// Create sets key to v only if key does not exist, and returns the
	// write's revision.
	Create(ctx context.Context, key K, v V) (Revision, error)
	// Update sets key to v only if its mod revision is still rev, and
	// returns the write's revision (above rev). rev 0 never matches: use
	// Create for a key that does not exist.
	Update(ctx context.Context, key K, v V, rev Revision) (Revision, error)
	// Delete removes key. With rev 0 it removes key whatever its revision
	// and returns the delete's revision, or 0 and a nil error if key did
	// not exist. With rev above 0 it removes key only if its mod revision is
	// still rev, and fails with ErrConflict otherwise, also if key does not
	// exist.
	Delete(ctx context.Context, key K, rev Revision) (Revision, error)
}

// Store is a Source whose keys can be read and written: a controller written
// against it runs unchanged on every backend (package memstore, package
// etcdstore). Run the conformance suite of package sourcetest on a new one.
type Store[K comparable, V any] interface {
	Source[K, V]
	ReadWriter[K, V]
}

// Revisioned is an informer's revision waiting, whatever its key and value
// types: what reconcile.Wrote needs to know whether the informer has seen a
// write, and to be told when it has. *Informer implements it.
type Revisioned interface {
	// Name names the informer, in logs.
	Name() string
	// LastRevision is the highest revision the informer has seen.
	LastRevision() Revision
	// WaitForRevision blocks until LastRevision() >= rev (see
	// Informer.WaitForRevision).
	WaitForRevision(ctx context.Context, rev Revision) error
	// AfterRevision calls f once LastRevision() >= rev (see
	// Informer.AfterRevision).
	AfterRevision(rev Revision, f func()) (stop func() bool)
}

var _ Revisioned = (*Informer[string, int])(nil)
