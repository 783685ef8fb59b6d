package sourcetest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// DefaultWait is the bound of every wait when Suite.Wait is zero.
const DefaultWait = 10 * time.Second

// Backend is one fresh, empty store under test, and how to change it
// behind its Source. Suite.New returns one per subtest; nothing else may
// write to it while the subtest runs.
type Backend[K comparable, V any] struct {
	// Source is the Source under test.
	Source informer.Source[K, V]
	// Put sets key to v. The change must be visible to any List that
	// starts after Put returns. It is called from one goroutine at a time
	// per key, but from several goroutines at once for different keys.
	Put func(ctx context.Context, key K, v V) error
	// Delete removes key; deleting an absent key changes nothing.
	Delete func(ctx context.Context, key K) error
	// Expire makes the store forget its history up to its current
	// revision: afterwards a Watch after a revision R returns
	// informer.ErrRevisionExpired if the store changed at least twice
	// since R, and a Watch after a revision that a List returns after
	// Expire works. (Twice, because etcd keeps the change at the
	// compaction revision and memory does not; the suite relies on no
	// more.) For a store with history that is compaction to the current
	// revision; for one that resumes only from its latest List
	// (ResumeLatestOnly), a List. nil: the store cannot expire revisions
	// on demand, and the subtests that need it check less.
	Expire func(ctx context.Context) error
	// PutUndecodable writes, at a new revision, a value for key that the
	// Source cannot decode (or otherwise take), as a person or another
	// program might: key may exist, with a good or a bad value, or not.
	// Like Put, the write must be visible to any List that starts after it
	// returns, and the store must hold it as key's value until the next
	// Put or Delete of key. The Source must then list key as an Entry with
	// Err set and Value unset (Revision, if set, the bad value's), and
	// watch it as a Put with Err set at the write's revision, without
	// failing its List or Watch; a later Put of a good value must list and
	// watch as usual, and a Delete must be watched as a Delete (its Value
	// may be the zero V). Called as Put is. nil for a store that cannot
	// hold such a value (the memory store, whose values are typed): the
	// subtest AnUndecodableValueIsABadEntryNotAStop is then skipped.
	PutUndecodable func(ctx context.Context, key K) error
	// DeletesCarryValue says that Delete events carry the deleted value
	// (unless it was one the Source could not decode; see
	// PutUndecodable). Otherwise a Delete event's Value may also be the
	// zero V.
	DeletesCarryValue bool
	// ResumeLatestOnly says that Watch resumes only after the revision of
	// the Source's latest List (package poll); after an older one it
	// returns informer.ErrRevisionExpired.
	ResumeLatestOnly bool
	// Coalesces says that intermediate values of a key may be skipped:
	// Watch emits a subsequence of the key's changes (package poll, which
	// sees only what each list shows).
	Coalesces bool
}

// Suite describes a Backend for Run.
type Suite[K comparable, V any] struct {
	// New returns a fresh, empty Backend. It is called once per subtest;
	// register the Backend's cleanup with t.Cleanup.
	New func(t *testing.T) Backend[K, V]
	// Key returns the i-th key; distinct i give distinct keys.
	Key func(i int) K
	// Value returns the i-th value; distinct i give distinct values, by
	// reflect.DeepEqual, also after the store's encoding round trip.
	Value func(i int) V
	// Wait bounds every wait of the suite: for an event, for a Watch to
	// return, for an informer to converge. Default: DefaultWait.
	Wait time.Duration
}

// Run runs the Source conformance subtests on fresh Backends from s.New.
// The properties each one checks are in the package documentation. The
// subtests run one after another, never in parallel, because a Backend's
// Expire may affect a whole server (etcd's compaction does).
func Run[K comparable, V any](t *testing.T, s Suite[K, V]) {
	require.NotNil(t, s.New, "Suite.New")
	require.NotNil(t, s.Key, "Suite.Key")
	require.NotNil(t, s.Value, "Suite.Value")
	if s.Wait <= 0 {
		s.Wait = DefaultWait
	}
	tests := []struct {
		name string
		run  func(*testing.T, Suite[K, V])
	}{
		{"ListIsOneSnapshot", testListIsOneSnapshot[K, V]},
		{"ChangesAfterAListHaveHigherRevisions", testChangesAfterAListHaveHigherRevisions[K, V]},
		{"WatchFromAnyListedRevisionMissesNothing", testWatchFromAnyListedRevisionMissesNothing[K, V]},
		{"PerKeyOrder", testPerKeyOrder[K, V]},
		{"DeletesCarryTheLastValueOrZero", testDeletesCarryTheLastValueOrZero[K, V]},
		{"ExpiredRevisionIsErrRevisionExpired", testExpiredRevisionIsErrRevisionExpired[K, V]},
		{"ConcurrentListAndWatch", testConcurrentListAndWatch[K, V]},
		{"CancelledContextEndsWatch", testCancelledContextEndsWatch[K, V]},
		{"EmitErrorIsReturned", testEmitErrorIsReturned[K, V]},
		{"AnInformerConverges", testAnInformerConverges[K, V]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, s) })
	}
	// A store that cannot hold a value its Source cannot decode (the
	// memory store, whose values are typed) has no such case to run.
	if b := s.newBackend(t); b.PutUndecodable != nil {
		t.Run("AnUndecodableValueIsABadEntryNotAStop", func(t *testing.T) { testUndecodable(t, s, b) })
	}
}

// newBackend calls s.New and checks that the Backend is complete.
func (s Suite[K, V]) newBackend(t *testing.T) Backend[K, V] {
	t.Helper()
	b := s.New(t)
	require.NotNil(t, b.Source, "Backend.Source")
	require.NotNil(t, b.Put, "Backend.Put")
	require.NotNil(t, b.Delete, "Backend.Delete")
	return b
}

// put and del write through b, failing t on an error.
func put[K comparable, V any](t *testing.T, b Backend[K, V], key K, v V) {
	t.Helper()
	require.NoError(t, b.Put(t.Context(), key, v), "Put %v", key)
}

func del[K comparable, V any](t *testing.T, b Backend[K, V], key K) {
	t.Helper()
	require.NoError(t, b.Delete(t.Context(), key), "Delete %v", key)
}

// list lists b's Source as a map and returns it with the revision,
// failing t on an error or a key listed twice.
func list[K comparable, V any](t *testing.T, src informer.Source[K, V]) (map[K]V, informer.Revision) {
	t.Helper()
	entries, rev, err := src.List(t.Context())
	require.NoError(t, err, "List")
	m, err := toMap(entries)
	require.NoError(t, err)
	return m, rev
}

// toMap folds a List into a map; a key listed twice is an error.
func toMap[K comparable, V any](entries []informer.Entry[K, V]) (map[K]V, error) {
	m := make(map[K]V, len(entries))
	for _, e := range entries {
		if _, dup := m[e.Key]; dup {
			return nil, fmt.Errorf("sourcetest: List returned key %v twice", e.Key)
		}
		m[e.Key] = e.Value
	}
	return m, nil
}

// fold applies events to a copy of m, as a cache would.
func fold[K comparable, V any](m map[K]V, events []informer.Event[K, V]) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, e := range events {
		switch e.Type {
		case informer.Put:
			out[e.Key] = e.Value
		case informer.Delete:
			delete(out, e.Key)
		}
	}
	return out
}

// same compares values and states the way the suite does.
func same(a, b any) bool { return reflect.DeepEqual(a, b) }

// isZero reports whether v is the zero V.
func isZero[V any](v V) bool {
	var zero V
	return reflect.DeepEqual(v, zero)
}

// checkRevisions checks what every Watch must emit: revisions above after
// that never go back, bookmarks included.
func checkRevisions[K comparable, V any](t *testing.T, after informer.Revision, events []informer.Event[K, V]) {
	t.Helper()
	last := after
	for i, e := range events {
		if e.Revision <= after {
			t.Errorf("event %d (%v %v) at revision %d, at or below the revision %d the watch started after", i, e.Type, e.Key, e.Revision, after)
		}
		if e.Revision < last {
			t.Errorf("event %d (%v %v) at revision %d after one at %d: revisions went back", i, e.Type, e.Key, e.Revision, last)
		}
		last = max(last, e.Revision)
	}
}

// recorder runs a Watch on its own goroutine and records what it emits.
type recorder[K comparable, V any] struct {
	cancel context.CancelFunc
	ended  chan struct{} // closed when Watch has returned; err is then set

	mu      sync.Mutex
	events  []informer.Event[K, V]
	changed chan struct{} // closed and replaced on every event
	err     error
}

// watch starts src.Watch(after) on a goroutine. The watch is stopped, and
// its goroutine waited for, when the test ends, if not before.
func watch[K comparable, V any](t *testing.T, src informer.Source[K, V], after informer.Revision) *recorder[K, V] {
	t.Helper()
	return watchCtx(t, context.Background(), src, after)
}

// watchCtx is watch with a context that the Watch's derives from.
func watchCtx[K comparable, V any](t *testing.T, parent context.Context, src informer.Source[K, V], after informer.Revision) *recorder[K, V] {
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	r := &recorder[K, V]{cancel: cancel, ended: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		err := src.Watch(ctx, after, func(e informer.Event[K, V]) error {
			r.mu.Lock()
			r.events = append(r.events, e)
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
			return nil
		})
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(r.ended)
	}()
	t.Cleanup(func() { r.cancel(); <-r.ended })
	return r
}

// snapshot returns the events so far.
func (r *recorder[K, V]) snapshot() []informer.Event[K, V] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]informer.Event[K, V](nil), r.events...)
}

// waitFor waits until cond holds for the events so far, and reports true;
// or until the watch has returned or wait has passed without it, and
// reports false. It waits for events, not on a timer: cond is checked once
// per event.
func (r *recorder[K, V]) waitFor(wait time.Duration, cond func([]informer.Event[K, V]) bool) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ok, changed := cond(r.events), r.changed
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-r.ended:
			r.mu.Lock()
			ok = cond(r.events)
			r.mu.Unlock()
			return ok
		case <-timer.C:
			return false
		}
	}
}

// result waits up to wait for the watch to return by itself, and reports
// whether it did, and its error.
func (r *recorder[K, V]) result(wait time.Duration) (ended bool, err error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-r.ended:
	default: // a select on both would pick at random when both are ready
		select {
		case <-r.ended:
		case <-timer.C:
			return false, nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return true, r.err
}

// stop cancels the watch and waits up to wait for it to return; it reports
// whether it returned, and its error.
func (r *recorder[K, V]) stop(wait time.Duration) (ended bool, err error) {
	r.cancel()
	return r.result(wait)
}

// endedWith describes how a watch ended, for failure messages.
func (r *recorder[K, V]) endedWith() string {
	select {
	case <-r.ended:
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Sprintf("the watch returned %v", r.err)
	default:
		return "the watch is still running"
	}
}
