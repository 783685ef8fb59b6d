package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// StoreSuite describes an informer.Store for RunStore.
type StoreSuite[K comparable, V any] struct {
	// New returns a fresh, empty Store. It is called once per subtest;
	// register the Store's cleanup with t.Cleanup. Nothing else may write
	// to its keys while the subtest runs.
	New func(t *testing.T) informer.Store[K, V]
	// Expire is Backend.Expire for the Source suite: it makes s forget its
	// history up to its current revision (memstore's Compact(Revision()),
	// etcd's compaction). nil: the store cannot.
	Expire func(ctx context.Context, s informer.Store[K, V]) error
	// PutUndecodable is Backend.PutUndecodable for the Source suite: it
	// writes, behind s, a value for key that s cannot decode. nil: the
	// store cannot hold one.
	PutUndecodable func(ctx context.Context, s informer.Store[K, V], key K) error
	// DeletesCarryValue is Backend.DeletesCarryValue.
	DeletesCarryValue bool
	// Key returns the i-th key; distinct i give distinct keys.
	Key func(i int) K
	// Value returns the i-th value; distinct i give distinct values, by
	// reflect.DeepEqual, also after the store's encoding round trip.
	// ConcurrentCASLosesNoUpdate counts with Value(0) to Value(400).
	Value func(i int) V
	// Wait bounds every wait, as Suite.Wait. Default: DefaultWait.
	Wait time.Duration
}

// RunStore runs the Source suite (Run, as subtest "Source") on stores from
// s.New, written through their own ReadWriter methods, then the Store
// subtests, which check the contract on informer.ReadWriter (see the
// package documentation). Like Run's, the subtests run one after another.
func RunStore[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	require.NotNil(t, s.New, "StoreSuite.New")
	require.NotNil(t, s.Key, "StoreSuite.Key")
	require.NotNil(t, s.Value, "StoreSuite.Value")
	if s.Wait <= 0 {
		s.Wait = DefaultWait
	}
	t.Run("Source", func(t *testing.T) {
		Run(t, Suite[K, V]{
			New:   func(t *testing.T) Backend[K, V] { return s.backend(t) },
			Key:   s.Key,
			Value: s.Value,
			Wait:  s.Wait,
		})
	})
	tests := []struct {
		name string
		run  func(*testing.T, StoreSuite[K, V])
	}{
		{"GetAbsent", testGetAbsent[K, V]},
		{"CreateThenGetReturnsTheWrittenRevision", testCreateThenGet[K, V]},
		{"CreateExistingConflictsAndWritesNothing", testCreateExisting[K, V]},
		{"UpdateAtRevision", testUpdateAtRevision[K, V]},
		{"UpdateStaleAbsentOrZeroConflicts", testUpdateConflicts[K, V]},
		{"DeleteUnconditional", testDeleteUnconditional[K, V]},
		{"DeleteAtRevision", testDeleteAtRevision[K, V]},
		{"WriteRevisionsAreTheWatchedOnes", testWriteRevisionsAreTheWatchedOnes[K, V]},
		{"ConcurrentCASLosesNoUpdate", testConcurrentCAS[K, V]},
		{"ConcurrentCASLosesNoUpdateThroughInformerUpdate", testConcurrentUpdateHelper[K, V]},
		{"ConflictsMatchInformerErrConflict", testConflictsMatch[K, V]},
		{"DoneContextFailsEveryMethodAndWritesNothing", testDoneContext[K, V]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, s) })
	}
}

// backend is a fresh store as a Backend of the Source suite, written only
// through its own ReadWriter methods: Put is a read-modify-write loop, so
// that the suite checks that what Create and Update write is what List and
// Watch show.
func (s StoreSuite[K, V]) backend(t *testing.T) Backend[K, V] {
	st := s.newStore(t)
	b := Backend[K, V]{
		Source: st,
		Put: func(ctx context.Context, key K, v V) error {
			for {
				_, rev, ok, err := st.Get(ctx, key)
				if err != nil {
					return err
				}
				if ok {
					_, err = st.Update(ctx, key, v, rev)
				} else {
					_, err = st.Create(ctx, key, v)
				}
				if !errors.Is(err, informer.ErrConflict) {
					return err
				}
			}
		},
		Delete: func(ctx context.Context, key K) error {
			_, err := st.Delete(ctx, key, 0)
			return err
		},
		DeletesCarryValue: s.DeletesCarryValue,
	}
	if s.Expire != nil {
		b.Expire = func(ctx context.Context) error { return s.Expire(ctx, st) }
	}
	if s.PutUndecodable != nil {
		b.PutUndecodable = func(ctx context.Context, key K) error { return s.PutUndecodable(ctx, st, key) }
	}
	return b
}

// newStore calls s.New and checks that it returned a Store.
func (s StoreSuite[K, V]) newStore(t *testing.T) informer.Store[K, V] {
	t.Helper()
	st := s.New(t)
	require.NotNil(t, st, "StoreSuite.New returned nil")
	return st
}

// mustGet gets key, failing t on an error.
func mustGet[K comparable, V any](t *testing.T, st informer.Store[K, V], key K) (V, informer.Revision, bool) {
	t.Helper()
	v, rev, ok, err := st.Get(t.Context(), key)
	require.NoError(t, err, "Get %v", key)
	return v, rev, ok
}

// requireAt checks that key holds v at revision rev.
func requireAt[K comparable, V any](t *testing.T, st informer.Store[K, V], key K, v V, rev informer.Revision, msg string) {
	t.Helper()
	got, gotRev, ok := mustGet(t, st, key)
	require.True(t, ok, "%s: Get %v: absent", msg, key)
	require.Equal(t, v, got, "%s: Get %v: value", msg, key)
	require.Equal(t, rev, gotRev, "%s: Get %v: mod revision", msg, key)
}

// requireAbsent checks that key does not exist.
func requireAbsent[K comparable, V any](t *testing.T, st informer.Store[K, V], key K, msg string) {
	t.Helper()
	_, _, ok := mustGet(t, st, key)
	require.False(t, ok, "%s: Get %v: present", msg, key)
}

// mustCreate creates key, failing t on an error.
func mustCreate[K comparable, V any](t *testing.T, st informer.Store[K, V], key K, v V) informer.Revision {
	t.Helper()
	rev, err := st.Create(t.Context(), key, v)
	require.NoError(t, err, "Create %v", key)
	require.Positive(t, rev, "Create %v: revision", key)
	return rev
}

// mustUpdate updates key at rev, failing t on an error or a revision not
// above rev.
func mustUpdate[K comparable, V any](t *testing.T, st informer.Store[K, V], key K, v V, rev informer.Revision) informer.Revision {
	t.Helper()
	r, err := st.Update(t.Context(), key, v, rev)
	require.NoError(t, err, "Update %v at %d", key, rev)
	require.Greater(t, r, rev, "Update %v at %d: revision", key, rev)
	return r
}

// GetAbsent: Get of a key never written returns ok false, a nil error, the
// zero V and revision 0.
func testGetAbsent[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	v, rev, ok, err := st.Get(t.Context(), s.Key(0))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Zero(t, rev)
	assert.True(t, isZero(v), "Get of an absent key returned %v, not the zero V", v)
}

// CreateThenGetReturnsTheWrittenRevision: Get returns what Create wrote and
// the revision Create returned; a later Create returns a higher revision.
func testCreateThenGet[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	r0 := mustCreate(t, st, s.Key(0), s.Value(0))
	requireAt(t, st, s.Key(0), s.Value(0), r0, "after Create")
	r1 := mustCreate(t, st, s.Key(1), s.Value(1))
	assert.Greater(t, r1, r0, "a later write's revision")
	requireAt(t, st, s.Key(1), s.Value(1), r1, "after the second Create")
	requireAt(t, st, s.Key(0), s.Value(0), r0, "the first key, after the second Create")
}

// CreateExistingConflictsAndWritesNothing: Create of an existing key fails
// with ErrConflict and revision 0, and the key keeps its value and revision.
func testCreateExisting[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k := s.Key(0)
	r0 := mustCreate(t, st, k, s.Value(0))
	rev, err := st.Create(t.Context(), k, s.Value(1))
	require.ErrorIs(t, err, informer.ErrConflict, "Create of an existing key")
	assert.Zero(t, rev, "revision of a failed Create")
	requireAt(t, st, k, s.Value(0), r0, "after the failed Create")
}

// UpdateAtRevision: Update at the key's revision writes, returns a higher
// revision, and Get returns both; a second Update at the new one works too.
func testUpdateAtRevision[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k := s.Key(0)
	r0 := mustCreate(t, st, k, s.Value(0))
	r1 := mustUpdate(t, st, k, s.Value(1), r0)
	requireAt(t, st, k, s.Value(1), r1, "after Update")
	r2 := mustUpdate(t, st, k, s.Value(2), r1)
	requireAt(t, st, k, s.Value(2), r2, "after the second Update")
}

// UpdateStaleAbsentOrZeroConflicts: Update at a revision the key is no
// longer at, of an absent key, or at revision 0 (which would create) fails
// with ErrConflict and writes nothing.
func testUpdateConflicts[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k, absent := s.Key(0), s.Key(1)
	r0 := mustCreate(t, st, k, s.Value(0))
	r1 := mustUpdate(t, st, k, s.Value(1), r0)

	for _, tc := range []struct {
		name string
		key  K
		rev  informer.Revision
	}{
		{"stale revision", k, r0},
		{"revision 0 of an existing key", k, 0},
		{"absent key", absent, r1},
		{"revision 0 of an absent key: Update never creates", absent, 0},
	} {
		rev, err := st.Update(t.Context(), tc.key, s.Value(2), tc.rev)
		require.ErrorIs(t, err, informer.ErrConflict, "Update, %s", tc.name)
		assert.Zero(t, rev, "Update, %s: revision", tc.name)
	}
	requireAt(t, st, k, s.Value(1), r1, "after the failed Updates")
	requireAbsent(t, st, absent, "after the failed Updates")
}

// DeleteUnconditional: Delete at revision 0 of a present key removes it and
// returns the delete's revision, above the key's; of an absent key it
// returns 0 and a nil error.
func testDeleteUnconditional[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k := s.Key(0)
	r0 := mustCreate(t, st, k, s.Value(0))
	d, err := st.Delete(t.Context(), k, 0)
	require.NoError(t, err, "Delete of a present key")
	assert.Greater(t, d, r0, "Delete's revision")
	requireAbsent(t, st, k, "after Delete")

	d, err = st.Delete(t.Context(), k, 0)
	require.NoError(t, err, "Delete of an absent key")
	assert.Zero(t, d, "Delete of an absent key: nothing was deleted")
	d, err = st.Delete(t.Context(), s.Key(1), 0)
	require.NoError(t, err, "Delete of a key never written")
	assert.Zero(t, d, "Delete of a key never written")
}

// DeleteAtRevision: Delete at a stale revision fails with ErrConflict and
// removes nothing; at the key's revision it removes it; at a revision of a
// key that is gone it fails with ErrConflict.
func testDeleteAtRevision[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k := s.Key(0)
	r0 := mustCreate(t, st, k, s.Value(0))
	r1 := mustUpdate(t, st, k, s.Value(1), r0)

	d, err := st.Delete(t.Context(), k, r0)
	require.ErrorIs(t, err, informer.ErrConflict, "Delete at a stale revision")
	assert.Zero(t, d)
	requireAt(t, st, k, s.Value(1), r1, "after Delete at a stale revision")

	d, err = st.Delete(t.Context(), k, r1)
	require.NoError(t, err, "Delete at the key's revision")
	assert.Greater(t, d, r1, "Delete's revision")
	requireAbsent(t, st, k, "after Delete at the key's revision")

	d, err = st.Delete(t.Context(), k, r1)
	require.ErrorIs(t, err, informer.ErrConflict, "Delete at a revision of an absent key")
	assert.Zero(t, d)
}

// WriteRevisionsAreTheWatchedOnes: every write's returned revision is the
// Revision of the Event that Watch emits for it, with the write's key and
// type, in order.
func testWriteRevisionsAreTheWatchedOnes[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	a, b := s.Key(0), s.Key(1)
	_, after, err := st.List(t.Context())
	require.NoError(t, err, "List")
	r := watch[K, V](t, st, after)

	type write struct {
		typ informer.EventType
		key K
		rev informer.Revision
	}
	var writes []write
	add := func(typ informer.EventType, key K, rev informer.Revision, err error) {
		t.Helper()
		require.NoError(t, err, "%v %v", typ, key)
		writes = append(writes, write{typ, key, rev})
	}
	rev, err := st.Create(t.Context(), a, s.Value(0))
	add(informer.Put, a, rev, err)
	rev, err = st.Update(t.Context(), a, s.Value(1), rev)
	add(informer.Put, a, rev, err)
	rb, err := st.Create(t.Context(), b, s.Value(2))
	add(informer.Put, b, rb, err)
	rev, err = st.Delete(t.Context(), a, 0)
	add(informer.Delete, a, rev, err)
	rev, err = st.Delete(t.Context(), b, rb)
	add(informer.Delete, b, rev, err)

	changes := func(events []informer.Event[K, V]) []write {
		var out []write
		for _, e := range events {
			if e.Type != informer.Bookmark {
				out = append(out, write{e.Type, e.Key, e.Revision})
			}
		}
		return out
	}
	ok := r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool { return len(changes(events)) >= len(writes) })
	require.True(t, ok, "the watch emitted %d changes of %d; %s", len(changes(r.snapshot())), len(writes), r.endedWith())
	assert.Equal(t, writes, changes(r.snapshot()), "the changes emitted, with their revisions, against the writes and the revisions they returned")
}

// casWriters and casIncrements are ConcurrentCASLosesNoUpdate's load.
const casWriters, casIncrements = 8, 50

// ConcurrentCASLosesNoUpdate: 8 goroutines each add 1, 50 times, to a
// counter (Value(n) stands for n) with a Get and Update loop that retries
// on ErrConflict. If two Updates at one revision both succeeded an
// increment would be lost: the counter must end at 400.
func testConcurrentCAS[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	runConcurrentIncrements(t, s, increment[K, V])
}

// ConcurrentCASLosesNoUpdateThroughInformerUpdate: ConcurrentCASLosesNoUpdate
// with each increment an informer.Update, as controllers write back, with
// attempts enough that the writers never give up: the helper's conflict
// handling, over this store's errors, loses no increment either.
func testConcurrentUpdateHelper[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	runConcurrentIncrements(t, s, incrementWithUpdate[K, V])
}

// incrementWithUpdate adds 1 to the counter at key with informer.Update.
func incrementWithUpdate[K comparable, V any](ctx context.Context, st informer.Store[K, V], key K, value func(int) V, values *valueIndex[V]) error {
	_, op, err := informer.Update(ctx, st, key, func(v *V) error {
		n, found := values.index(*v)
		if !found {
			return fmt.Errorf("the counter %v holds %v, not one of the values counted with", key, *v)
		}
		*v = value(n + 1)
		return nil
	}, informer.WithAttempts(casWriters*casIncrements))
	if err == nil && op != informer.Updated {
		return fmt.Errorf("informer.Update of the counter %v: %v, want Updated", key, op)
	}
	return err
}

// runConcurrentIncrements runs ConcurrentCASLosesNoUpdate with inc as the
// increment.
func runConcurrentIncrements[K comparable, V any](t *testing.T, s StoreSuite[K, V],
	inc func(context.Context, informer.Store[K, V], K, func(int) V, *valueIndex[V]) error) {
	st := s.newStore(t)
	k := s.Key(0)
	const total = casWriters * casIncrements
	values := newValueIndex(s.Value, total)
	mustCreate(t, st, k, s.Value(0))

	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, casWriters)
	for range casWriters {
		wg.Go(func() {
			for range casIncrements {
				if err := inc(ctx, st, k, s.Value, values); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	v, _, ok := mustGet(t, st, k)
	require.True(t, ok)
	n, found := values.index(v)
	require.True(t, found, "the counter holds %v, not one of Value(0..%d)", v, total)
	require.Equal(t, total, n, "increments: fewer means a lost update")
}

// increment adds 1 to the counter at key by read-modify-write, retrying on
// ErrConflict, as a controller writes back.
func increment[K comparable, V any](ctx context.Context, st informer.Store[K, V], key K, value func(int) V, values *valueIndex[V]) error {
	for {
		v, rev, ok, err := st.Get(ctx, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("the counter %v is gone", key)
		}
		n, found := values.index(v)
		if !found {
			return fmt.Errorf("the counter %v holds %v, not one of the values counted with", key, v)
		}
		_, err = st.Update(ctx, key, value(n+1), rev)
		if errors.Is(err, informer.ErrConflict) {
			continue // someone else incremented first: read again
		}
		return err
	}
}

// valueIndex maps Value(i) back to i, for i in [0, n].
type valueIndex[V any] struct {
	values []V
	byText map[string]int // by fmt %#v, when that tells them apart
}

func newValueIndex[V any](value func(int) V, n int) *valueIndex[V] {
	x := &valueIndex[V]{byText: make(map[string]int, n+1)}
	for i := range n + 1 {
		v := value(i)
		x.values = append(x.values, v)
		text := fmt.Sprintf("%#v", v)
		if _, dup := x.byText[text]; dup {
			x.byText = nil // print alike (pointers?): compare with DeepEqual
		}
		if x.byText != nil {
			x.byText[text] = i
		}
	}
	return x
}

// index returns i with Value(i) equal to v.
func (x *valueIndex[V]) index(v V) (int, bool) {
	if x.byText != nil {
		i, ok := x.byText[fmt.Sprintf("%#v", v)]
		if ok && same(x.values[i], v) {
			return i, true
		}
	}
	for i, w := range x.values {
		if same(w, v) {
			return i, true
		}
	}
	return 0, false
}

// ConflictsMatchInformerErrConflict: every kind of conflict, however the
// backend words it, matches informer.ErrConflict with errors.Is, so that
// a controller needs no backend's error.
func testConflictsMatch[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k, absent := s.Key(0), s.Key(1)
	r0 := mustCreate(t, st, k, s.Value(0))
	r1 := mustUpdate(t, st, k, s.Value(1), r0)
	ctx := t.Context()
	for name, write := range map[string]func() (informer.Revision, error){
		"Create of an existing key":        func() (informer.Revision, error) { return st.Create(ctx, k, s.Value(2)) },
		"Update at a stale revision":       func() (informer.Revision, error) { return st.Update(ctx, k, s.Value(2), r0) },
		"Update at revision 0":             func() (informer.Revision, error) { return st.Update(ctx, k, s.Value(2), 0) },
		"Update of an absent key":          func() (informer.Revision, error) { return st.Update(ctx, absent, s.Value(2), r1) },
		"Delete at a stale revision":       func() (informer.Revision, error) { return st.Delete(ctx, k, r0) },
		"Delete at a revision, key absent": func() (informer.Revision, error) { return st.Delete(ctx, absent, r1) },
	} {
		_, err := write()
		assert.ErrorIs(t, err, informer.ErrConflict, name)
	}
	requireAt(t, st, k, s.Value(1), r1, "after the conflicts")
	requireAbsent(t, st, absent, "after the conflicts")
}

// DoneContextFailsEveryMethodAndWritesNothing: with a context done before
// the call, every method returns an error that errors.Is ctx.Err(), and
// no write happens.
func testDoneContext[K comparable, V any](t *testing.T, s StoreSuite[K, V]) {
	st := s.newStore(t)
	k, absent := s.Key(0), s.Key(1)
	r0 := mustCreate(t, st, k, s.Value(0))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, _, _, err := st.Get(ctx, k)
	assert.ErrorIs(t, err, context.Canceled, "Get")
	_, err = st.Create(ctx, absent, s.Value(1))
	assert.ErrorIs(t, err, context.Canceled, "Create")
	_, err = st.Update(ctx, k, s.Value(1), r0)
	assert.ErrorIs(t, err, context.Canceled, "Update")
	_, err = st.Delete(ctx, k, r0)
	assert.ErrorIs(t, err, context.Canceled, "Delete at a revision")
	_, err = st.Delete(ctx, k, 0)
	assert.ErrorIs(t, err, context.Canceled, "Delete")

	requireAt(t, st, k, s.Value(0), r0, "after the calls with a done context")
	requireAbsent(t, st, absent, "after Create with a done context")
}
