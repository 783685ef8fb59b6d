package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// pair is the writer of the snapshot tests: for n = 0, 1, 2, ... it sets
// key a to Value(n), then key b to Value(n). A List that is one snapshot
// sees a at n or n+1 when it sees b at n; a List that mixes two moments
// can see b ahead of a, or a two steps ahead.
type pair[K comparable, V any] struct {
	s    Suite[K, V]
	b    Backend[K, V]
	a, c K // a is written first, c (the "b" of the docs) second
	// doneA and doneC are the highest n whose Put of a, and of c, has
	// returned (-1: none yet).
	doneA, doneC atomic.Int64
}

func newPair[K comparable, V any](s Suite[K, V], b Backend[K, V]) *pair[K, V] {
	p := &pair[K, V]{s: s, b: b, a: s.Key(0), c: s.Key(1)}
	p.doneA.Store(-1)
	p.doneC.Store(-1)
	return p
}

// write sets a, then c, to Value(n).
func (p *pair[K, V]) write(ctx context.Context, n int) error {
	if err := p.b.Put(ctx, p.a, p.s.Value(n)); err != nil {
		return fmt.Errorf("sourcetest: Put a=%d: %w", n, err)
	}
	p.doneA.Store(int64(n))
	if err := p.b.Put(ctx, p.c, p.s.Value(n)); err != nil {
		return fmt.Errorf("sourcetest: Put b=%d: %w", n, err)
	}
	p.doneC.Store(int64(n))
	return nil
}

// check lists once, after write(0) returned, and checks that the list is
// one snapshot, and that it has every write that returned before it began.
func (p *pair[K, V]) check(ctx context.Context) error {
	lo := int(p.doneC.Load()) // both keys are at lo or later
	entries, _, err := p.b.Source.List(ctx)
	if err != nil {
		return fmt.Errorf("sourcetest: List: %w", err)
	}
	hi := int(p.doneA.Load()) + 1 // a Put of a may be in flight
	m, err := toMap(entries)
	if err != nil {
		return err
	}
	if len(m) != 2 {
		return fmt.Errorf("sourcetest: List returned %d keys, want the 2 written", len(m))
	}
	ia, ic := p.index(m[p.a], lo, hi), p.index(m[p.c], lo, hi)
	if ia < 0 || ic < 0 {
		return fmt.Errorf("sourcetest: List returned a=%v, b=%v: want values written from Value(%d) (returned before the List began) to Value(%d)",
			m[p.a], m[p.c], lo, hi)
	}
	if ic > ia || ia > ic+1 {
		return fmt.Errorf("sourcetest: List returned a=Value(%d), b=Value(%d): not one snapshot (a is written first, so b <= a <= b+1)", ia, ic)
	}
	return nil
}

// index returns the n in [lo, hi] such that v is Value(n), or -1.
func (p *pair[K, V]) index(v V, lo, hi int) int {
	for n := max(lo, 0); n <= hi; n++ {
		if same(v, p.s.Value(n)) {
			return n
		}
	}
	return -1
}

// listing is a set of goroutines that List and check.
type listing struct {
	wg    sync.WaitGroup
	lists atomic.Int64
	stop  chan struct{}
	once  sync.Once
}

// listers starts n goroutines that List and check until stopped, or until
// one fails.
func (p *pair[K, V]) listers(t *testing.T, n int) *listing {
	l := &listing{stop: make(chan struct{})}
	for range n {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := p.check(t.Context()); err != nil {
					t.Error(err)
					return
				}
				l.lists.Add(1)
			}
		})
	}
	return l
}

// count returns how many lists were checked so far.
func (l *listing) count() int64 { return l.lists.Load() }

// halt stops the listers, waits for them and returns how many lists they
// checked. It may be called more than once.
func (l *listing) halt() int64 {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
	return l.lists.Load()
}

// ListIsOneSnapshot: a writer sets a, then b, to Value(n) for growing n;
// every List that runs meanwhile has b <= a <= b+1, and nothing older than
// what had been written when it began.
func testListIsOneSnapshot[K comparable, V any](t *testing.T, s Suite[K, V]) {
	const (
		listers   = 2
		minWrites = 20
		minLists  = 40
		maxWrites = 5000
	)
	b := s.newBackend(t)
	p := newPair(s, b)
	require.NoError(t, p.write(t.Context(), 0))
	ls := p.listers(t, listers)
	defer ls.halt() // also on a failed write: no lister outlives the test

	// Write until the listers have checked enough lists while writes were
	// under way: a fast store (memory) needs few writes, a slow one (etcd)
	// few lists, and a broken one shows up either way.
	deadline := time.Now().Add(s.Wait)
	n := 1
	// Past maxWrites only until a List has completed: on a loaded machine
	// the listers may not have run yet while an in-memory store takes
	// thousands of writes.
	for ; (n <= maxWrites || ls.count() == 0) && time.Now().Before(deadline); n++ {
		require.NoError(t, p.write(t.Context(), n))
		if t.Failed() || (n >= minWrites && ls.count() >= minLists) {
			break
		}
	}
	lists, writes := ls.halt(), p.doneC.Load()
	assert.GreaterOrEqual(t, lists, int64(1), "no List completed during %d writes", writes)
	t.Logf("%d Lists checked during %d writes", lists, writes)
}

// ConcurrentListAndWatch: 4 listers, 2 watches (one from before the
// writes, one from a List in the middle of them) and a writer at once.
// Every List is a snapshot as in ListIsOneSnapshot, and each watch,
// replayed onto its List, reaches the final state, or returns
// ErrRevisionExpired (a poll source expires a watch at every other List).
func testConcurrentListAndWatch[K comparable, V any](t *testing.T, s Suite[K, V]) {
	const (
		minWrites = 50
		minLists  = 40
		maxWrites = 5000
	)
	b := s.newBackend(t)
	p := newPair(s, b)
	require.NoError(t, p.write(t.Context(), 0))

	type watched struct {
		listed map[K]V
		after  informer.Revision
		r      *recorder[K, V]
	}
	var ws []watched
	m, rev := list(t, b.Source)
	ws = append(ws, watched{m, rev, watch(t, b.Source, rev)})

	ls := p.listers(t, 4)
	defer ls.halt()
	// As in ListIsOneSnapshot, write until enough Lists ran meanwhile.
	deadline := time.Now().Add(s.Wait)
	writes := 1
	for ; writes <= maxWrites && time.Now().Before(deadline); writes++ {
		require.NoError(t, p.write(t.Context(), writes))
		if writes == minWrites/2 {
			m, rev := list(t, b.Source)
			ws = append(ws, watched{m, rev, watch(t, b.Source, rev)})
		}
		if t.Failed() || (writes >= minWrites && ls.count() >= minLists) {
			break
		}
	}
	final := int(p.doneC.Load()) // the loop may have counted one more than it wrote
	t.Logf("%d Lists checked during %d writes", ls.halt(), final)

	want := map[K]V{p.a: s.Value(final), p.c: s.Value(final)}
	for i, w := range ws {
		converged := w.r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool {
			return same(fold(w.listed, events), want)
		})
		if !converged {
			ended, err := w.r.result(0)
			if !ended || !errors.Is(err, informer.ErrRevisionExpired) {
				t.Errorf("watch %d after revision %d neither reached the final state nor expired within %v: %s; it reached %v, want %v",
					i, w.after, s.Wait, w.r.endedWith(), fold(w.listed, w.r.snapshot()), want)
			}
		}
		ended, _ := w.r.stop(s.Wait)
		assert.True(t, ended, "watch %d did not return within %v of its context's cancellation", i, s.Wait)
		checkRevisions(t, w.after, w.r.snapshot())
	}
}
