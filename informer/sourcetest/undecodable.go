package sourcetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// AnUndecodableValueIsABadEntryNotAStop (run only if the Backend has
// PutUndecodable): good values for several keys, a Watch from a List of
// them, then an undecodable value for a listed key and for a new one.
// The Watch emits a Put with Err for each and goes on emitting the next
// good change of another key; a List has both keys with Err and the
// others decoded. Then an informer over the Source, started while they
// are bad: it caches the others, reports both in BadKeys, delivers the
// others' changes, keeps a key's last good value when a watched value of
// it is bad, recovers each key at its next good value, and drops a bad
// key that is deleted.
//
// The List is taken only once the raw Watch is over, and the informer runs
// alone, so that a Source that resumes only from its latest List
// (ResumeLatestOnly) is not made to expire.
func testUndecodable[K comparable, V any](t *testing.T, s Suite[K, V], b Backend[K, V]) {
	k0, k1, k2, k3 := s.Key(0), s.Key(1), s.Key(2), s.Key(3)
	h := &checkingHandler[K, V]{s: s, history: map[K][]int{}, view: map[K]V{}}
	model := map[K]V{}
	write := func(k K, vi int) {
		t.Helper()
		h.written(k, vi) // before the Put: an informer may see it at once
		put(t, b, k, s.Value(vi))
		model[k] = s.Value(vi)
	}
	putBad := func(k K) {
		t.Helper()
		require.NoError(t, b.PutUndecodable(t.Context(), k), "PutUndecodable %v", k)
	}
	write(k0, 1)
	write(k1, 2)
	write(k2, 3)
	listed, rev := list(t, b.Source)
	require.Equal(t, model, listed, "List after three Puts")

	r := watch(t, b.Source, rev)
	waitBadPut := func(k K) int {
		t.Helper()
		at := -1
		ok := r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool {
			at = indexOf(events, func(e informer.Event[K, V]) bool {
				return e.Type == informer.Put && e.Key == k && e.Err != nil
			})
			return at >= 0
		})
		require.True(t, ok, "within %v of PutUndecodable(%v), Watch(%d) emitted no Put with Err for it: %v; %s",
			s.Wait, k, rev, r.snapshot(), r.endedWith())
		e := r.snapshot()[at]
		assert.True(t, isZero(e.Value), "the Put with Err of %v carries a Value: %v", k, e.Value)
		return at
	}
	putBad(k0)
	waitBadPut(k0)
	putBad(k3) // a key whose first value is bad
	bad3 := waitBadPut(k3)
	write(k1, 4)
	ok := r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool {
		return indexOf(events[bad3+1:], func(e informer.Event[K, V]) bool {
			return e.Type == informer.Put && e.Key == k1 && e.Err == nil && same(e.Value, s.Value(4))
		}) >= 0
	})
	assert.True(t, ok, "within %v, Watch(%d) did not go on past the bad values to the next good change of %v: %v; %s",
		s.Wait, rev, k1, r.snapshot(), r.endedWith())
	ended, _ := r.result(0)
	assert.False(t, ended, "the watch stopped at a bad value: %s", r.endedWith())
	r.stop(s.Wait)
	checkRevisions(t, rev, r.snapshot())

	entries, listRev, err := b.Source.List(t.Context())
	require.NoError(t, err, "List with bad values")
	good, bad := map[K]V{}, map[K]informer.Entry[K, V]{}
	for _, e := range entries {
		_, dupGood := good[e.Key]
		_, dupBad := bad[e.Key]
		require.False(t, dupGood || dupBad, "List returned %v twice", e.Key)
		if e.Err != nil {
			bad[e.Key] = e
			assert.True(t, isZero(e.Value), "the entry with Err of %v has a Value: %v", e.Key, e.Value)
			assert.True(t, e.Revision == 0 || e.Revision > rev && e.Revision <= listRev,
				"the entry with Err of %v has revision %d; want 0, or above %d (the values were good then) and at most the list's %d",
				e.Key, e.Revision, rev, listRev)
			continue
		}
		good[e.Key] = e.Value
	}
	assert.Equal(t, map[K]V{k1: s.Value(4), k2: s.Value(3)}, good, "List decodes every other key")
	assert.ElementsMatch(t, []K{k0, k3}, keysOf(bad), "List has the bad keys, with Err")
	delete(model, k0)

	// An informer started while k0 and k3 are bad.
	inf := runInformer(t, s.Wait, b.Source, h, "WaitForSync with bad keys")
	// The informer runs on its own goroutines and the real clock: its
	// state is polled, as in AnInformerConverges.
	reaches := func(what string, wantBad map[K]bool) {
		t.Helper()
		var cached, view map[K]V
		var badNow map[K]bool // key: whether the cache keeps a good value
		ok := eventually(s.Wait, 2*time.Millisecond, func() bool {
			cached, _ = toMap(inf.List())
			view = h.snapshot()
			badNow = map[K]bool{}
			for _, bk := range inf.BadKeys() {
				badNow[bk.Key] = bk.HasValue
			}
			return same(cached, model) && same(view, model) && same(badNow, wantBad)
		})
		assert.True(t, ok, "%s: within %v the informer has cache %v, handler's view %v, bad keys (key: has a value) %v; want %v, %v, %v (stats %+v)",
			what, s.Wait, cached, view, badNow, model, model, wantBad, inf.Stats())
	}
	reaches("started with two bad keys", map[K]bool{k0: false, k3: false})

	write(k2, 5)
	reaches("a change of another key", map[K]bool{k0: false, k3: false})
	putBad(k1) // a key with a good value in the informer's cache
	write(k2, 6)
	reaches("a watched bad value of a cached key, then a change of another key", map[K]bool{k0: false, k1: true, k3: false})

	write(k0, 7)
	write(k1, 8)
	write(k3, 9)
	reaches("good values for the bad keys", map[K]bool{})

	putBad(k2)
	del(t, b, k2)
	delete(model, k2)
	write(k1, 10)
	reaches("a bad key deleted", map[K]bool{})
	assert.NotZero(t, inf.Stats().DecodeErrors, "Stats.DecodeErrors")
	for _, err := range h.failures() {
		t.Error(err)
	}
}

// indexOf returns the index of the first event that matches, or -1.
func indexOf[K comparable, V any](events []informer.Event[K, V], match func(informer.Event[K, V]) bool) int {
	for i, e := range events {
		if match(e) {
			return i
		}
	}
	return -1
}

func keysOf[K comparable, V any](m map[K]informer.Entry[K, V]) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
