package sourcetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// ChangesAfterAListHaveHigherRevisions: List at R, then a Put of a listed
// key, a Delete of another and a Put of a new one; Watch(R) emits all
// three, every event above R.
func testChangesAfterAListHaveHigherRevisions[K comparable, V any](t *testing.T, s Suite[K, V]) {
	b := s.newBackend(t)
	k0, k1, k2 := s.Key(0), s.Key(1), s.Key(2)
	put(t, b, k0, s.Value(0))
	put(t, b, k1, s.Value(1))
	listed, rev := list(t, b.Source)
	require.Equal(t, map[K]V{k0: s.Value(0), k1: s.Value(1)}, listed, "List after two Puts")

	put(t, b, k1, s.Value(2))
	del(t, b, k0)
	put(t, b, k2, s.Value(3))
	want := map[K]V{k1: s.Value(2), k2: s.Value(3)}

	r := watch(t, b.Source, rev)
	ok := r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool { return same(fold(listed, events), want) })
	ended, err := r.stop(s.Wait)
	assert.True(t, ended, "Watch did not return within %v of its context's cancellation", s.Wait)
	events := r.snapshot()
	assert.True(t, ok, "Watch(%d) replayed onto List(%d) reached %v, want %v within %v; emitted %v; %v",
		rev, rev, fold(listed, events), want, s.Wait, events, err)
	checkRevisions(t, rev, events)
}

// WatchFromAnyListedRevisionMissesNothing: Lists at R0..Rn between random
// writes, then a last Put; Watch(Ri) replayed onto List(Ri) reaches the
// final state for every i. With ResumeLatestOnly, Watch(Ri) for an Ri
// older than the latest List returns ErrRevisionExpired instead.
func testWatchFromAnyListedRevisionMissesNothing[K comparable, V any](t *testing.T, s Suite[K, V]) {
	const keys, rounds = 6, 6
	b := s.newBackend(t)
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: a failure replays
	model := map[K]V{}
	next := 0 // the next value index: every Put writes a new value
	write := func() {
		k := s.Key(rng.IntN(keys))
		if _, ok := model[k]; ok && rng.IntN(3) == 0 {
			del(t, b, k)
			delete(model, k)
			return
		}
		put(t, b, k, s.Value(next))
		model[k] = s.Value(next)
		next++
	}
	type listing struct {
		m   map[K]V
		rev informer.Revision
	}
	var lists []listing
	for range rounds {
		for range 1 + rng.IntN(3) {
			write()
		}
		m, rev := list(t, b.Source)
		require.Equal(t, model, m, "List after the writes")
		lists = append(lists, listing{m, rev})
	}
	// A last Put with a new value: once a replay has it, in revision
	// order, it has everything.
	put(t, b, s.Key(0), s.Value(next))
	model[s.Key(0)] = s.Value(next)
	latest := lists[len(lists)-1].rev

	for i, l := range lists {
		r := watch(t, b.Source, l.rev)
		if b.ResumeLatestOnly && l.rev != latest {
			ended, err := r.result(s.Wait)
			require.True(t, ended, "Watch(%d) with a later List at %d did not return within %v", l.rev, latest, s.Wait)
			assert.ErrorIs(t, err, informer.ErrRevisionExpired, "Watch(%d) with a later List at %d", l.rev, latest)
			continue
		}
		ok := r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool { return same(fold(l.m, events), model) })
		ended, _ := r.stop(s.Wait)
		assert.True(t, ended, "Watch did not return within %v of its context's cancellation", s.Wait)
		events := r.snapshot()
		assert.True(t, ok, "List %d: Watch(%d) replayed onto its List reached %v, want %v within %v; %s",
			i, l.rev, fold(l.m, events), model, s.Wait, r.endedWith())
		checkRevisions(t, l.rev, events)
	}
}

// op is one write of PerKeyOrder: a Put of Value(value), or a Delete.
type op struct {
	typ   informer.EventType
	value int
}

// PerKeyOrder: concurrent writers, each with keys of its own; per key the
// Puts and Deletes emitted are the key's writes in order (a subsequence of
// them if Coalesces, which ends with the last), an event repeated is only
// ever the one just before for that key, and revisions, bookmarks
// included, never go back.
func testPerKeyOrder[K comparable, V any](t *testing.T, s Suite[K, V]) {
	const writers, keysPerWriter, opsPerWriter = 4, 3, 25
	b := s.newBackend(t)
	_, rev := list(t, b.Source)
	r := watch(t, b.Source, rev)

	ops := make([][]op, writers*keysPerWriter) // per key index
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			present := map[int]bool{}
			for i := range opsPerWriter {
				ki := w*keysPerWriter + rng.IntN(keysPerWriter)
				if present[ki] && rng.IntN(3) == 0 {
					if errs[w] = b.Delete(t.Context(), s.Key(ki)); errs[w] != nil {
						return
					}
					present[ki] = false
					ops[ki] = append(ops[ki], op{typ: informer.Delete})
					continue
				}
				vi := 1000 + w*opsPerWriter + i
				if errs[w] = b.Put(t.Context(), s.Key(ki), s.Value(vi)); errs[w] != nil {
					return
				}
				present[ki] = true
				ops[ki] = append(ops[ki], op{typ: informer.Put, value: vi})
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	// A last Put after every other write: a source that emits in revision
	// order has emitted everything once it has emitted this.
	sentinel := s.Key(writers * keysPerWriter)
	put(t, b, sentinel, s.Value(999_999))

	matches := func(e informer.Event[K, V], o op) bool {
		return e.Type == o.typ && (o.typ == informer.Delete || same(e.Value, s.Value(o.value)))
	}
	final := map[K]V{sentinel: s.Value(999_999)}
	for ki, kops := range ops {
		if n := len(kops); n > 0 && kops[n-1].typ == informer.Put {
			final[s.Key(ki)] = s.Value(kops[n-1].value)
		}
	}
	// Once the sentinel is out, a source that emits in revision order is
	// done; one that coalesces may still be emitting the rest of its last
	// batch (poll emits Deletes after Puts), so wait for the final state
	// too. A key that a coalescing source never saw may have no events.
	done := func(events []informer.Event[K, V]) bool {
		return same(fold(nil, events), final)
	}
	ok := r.waitFor(s.Wait, done)
	ended, _ := r.stop(s.Wait)
	assert.True(t, ended, "Watch did not return within %v of its context's cancellation", s.Wait)
	events := r.snapshot()
	require.True(t, ok, "Watch did not emit every key's last write within %v; %s", s.Wait, r.endedWith())
	checkRevisions(t, rev, events)

	perKey := map[K][]informer.Event[K, V]{}
	for _, e := range events {
		if e.Type == informer.Bookmark {
			continue
		}
		seen := perKey[e.Key]
		if n := len(seen); n > 0 && same(seen[n-1], e) {
			continue // a duplicate of the latest: allowed
		}
		perKey[e.Key] = append(seen, e)
	}
	for ki, kops := range ops {
		got := perKey[s.Key(ki)]
		if n := len(got); b.Coalesces && n > 0 && !matches(got[n-1], kops[len(kops)-1]) {
			t.Errorf("key %v: the last event emitted (%v at revision %d) is not the last write", s.Key(ki), got[n-1].Type, got[n-1].Revision)
		}
		if err := inOrder(got, kops, b.Coalesces, matches); err != nil {
			t.Errorf("key %v: %v\n\twrites: %v\n\temitted: %v", s.Key(ki), err, kops, got)
		}
	}
}

// inOrder checks that got is want (a subsequence of want if sub), by match.
func inOrder[K comparable, V any](got []informer.Event[K, V], want []op, sub bool, match func(informer.Event[K, V], op) bool) error {
	j := 0
	for i, e := range got {
		if sub {
			for j < len(want) && !match(e, want[j]) {
				j++
			}
		}
		if j >= len(want) || !match(e, want[j]) {
			return fmt.Errorf("emitted event %d (%v at revision %d) is not the next write", i, e.Type, e.Revision)
		}
		j++
	}
	if !sub && j != len(want) {
		return fmt.Errorf("%d writes, %d emitted", len(want), j)
	}
	return nil
}

// DeletesCarryTheLastValueOrZero: a key Put twice (the second seen by the
// watch) and then deleted, and a key Put once and deleted: each Delete
// event carries the key's last value, or, unless DeletesCarryValue, the
// zero V.
func testDeletesCarryTheLastValueOrZero[K comparable, V any](t *testing.T, s Suite[K, V]) {
	b := s.newBackend(t)
	_, rev := list(t, b.Source)
	r := watch(t, b.Source, rev)
	cases := []struct {
		key  K
		puts []int
	}{
		{s.Key(0), []int{1, 2}},
		{s.Key(1), []int{3}},
	}
	for _, c := range cases {
		for _, vi := range c.puts {
			put(t, b, c.key, s.Value(vi))
		}
		last := s.Value(c.puts[len(c.puts)-1])
		// Wait for the last value before deleting: a source that
		// coalesces would otherwise be right to emit nothing at all.
		require.True(t, r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool {
			return len(events) > 0 && same(fold(nil, events)[c.key], last)
		}), "Watch did not emit %v=%v within %v; %s", c.key, last, s.Wait, r.endedWith())
		del(t, b, c.key)
		var deleted informer.Event[K, V]
		require.True(t, r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool {
			for _, e := range events {
				if e.Type == informer.Delete && e.Key == c.key {
					deleted = e
					return true
				}
			}
			return false
		}), "Watch did not emit the Delete of %v within %v; %s", c.key, s.Wait, r.endedWith())
		if b.DeletesCarryValue {
			assert.Equal(t, last, deleted.Value, "the Delete of %v carries its last value", c.key)
		} else if !isZero(deleted.Value) {
			assert.Equal(t, last, deleted.Value, "the Delete of %v carries its last value or the zero V", c.key)
		}
	}
	ended, _ := r.stop(s.Wait)
	assert.True(t, ended, "Watch did not return within %v of its context's cancellation", s.Wait)
	checkRevisions(t, rev, r.snapshot())
}
