package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

type event = informer.Event[string, int]

var errStop = errors.New("stop")

// watchTo watches s after after until it has seen revision to, and returns
// the events. Every change up to to must already be in s: it runs on the
// test's goroutine.
func watchTo(t *testing.T, s *memstore.Store[string, int], after, to informer.Revision) []event {
	t.Helper()
	var got []event
	err := s.Watch(context.Background(), after, func(e event) error {
		got = append(got, e)
		if e.Revision >= to {
			return errStop
		}
		return nil
	})
	require.ErrorIs(t, err, errStop)
	return got
}

// watchInBackground runs Watch on its own goroutine, sending the events to
// the returned channel, and the result of Watch to done. The watch stops
// when the test ends.
func watchInBackground(t *testing.T, s *memstore.Store[string, int], after informer.Revision) (events <-chan event, done <-chan error, cancel context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ev := make(chan event, 100)
	d := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		d <- s.Watch(ctx, after, func(e event) error {
			select {
			case ev <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return ev, d, cancel
}

// receive takes n events, failing the test if they do not come.
func receive(t *testing.T, events <-chan event, n int) []event {
	t.Helper()
	var got []event
	for range n {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no event", "got %d of %d: %v", len(got), n, got)
		}
	}
	return got
}

// history writes five changes and returns them as the events they make.
func history(s *memstore.Store[string, int]) []event {
	s.Put("a", 1)
	s.Put("b", 2)
	s.Put("a", 3)
	_, _ = s.Delete(context.Background(), "b", 0)
	s.Put("c", 5)
	return []event{
		{Type: informer.Put, Key: "a", Value: 1, Revision: 1},
		{Type: informer.Put, Key: "b", Value: 2, Revision: 2},
		{Type: informer.Put, Key: "a", Value: 3, Revision: 3},
		{Type: informer.Delete, Key: "b", Value: 2, Revision: 4},
		{Type: informer.Put, Key: "c", Value: 5, Revision: 5},
	}
}

func TestWatchShouldDeliverExactlyTheChangesAfterItsRevisionInOrder(t *testing.T) {
	for _, after := range []informer.Revision{0, 1, 2, 3, 4} {
		s := must.Do(memstore.New[string, int]())
		all := history(s)
		assert.Equal(t, all[after:], watchTo(t, s, after, 5), "after %d", after)
	}
}

func TestWatchFromTheCurrentRevisionShouldDeliverOnlyLaterChanges(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	history(s)
	events, _, _ := watchInBackground(t, s, s.Revision())

	s.Put("d", 6)
	_, _ = s.Delete(context.Background(), "a", 0)
	assert.Equal(t, []event{
		{Type: informer.Put, Key: "d", Value: 6, Revision: 6},
		{Type: informer.Delete, Key: "a", Value: 3, Revision: 7},
	}, receive(t, events, 2))
}

func TestWatchShouldDeliverTheBacklogAndThenWaitForNewChanges(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	all := history(s)
	events, _, _ := watchInBackground(t, s, 0)
	assert.Equal(t, all, receive(t, events, 5))
	s.Put("z", 26)
	assert.Equal(t, []event{{Type: informer.Put, Key: "z", Value: 26, Revision: 6}}, receive(t, events, 1))
}

func TestEveryWaitingWatcherShouldBeWokenByAWrite(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	a, _, _ := watchInBackground(t, s, 0)
	b, _, _ := watchInBackground(t, s, 0)
	s.Put("k", 1)
	want := []event{{Type: informer.Put, Key: "k", Value: 1, Revision: 1}}
	assert.Equal(t, want, receive(t, a, 1))
	assert.Equal(t, want, receive(t, b, 1))
}

func TestWatchShouldDeliverMoreChangesThanOneBatch(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	const n = 1000
	for i := range n {
		s.Put("k", i)
	}
	got := watchTo(t, s, 0, n)
	require.Len(t, got, n)
	for i, e := range got {
		assert.Equal(t, informer.Revision(i+1), e.Revision)
		assert.Equal(t, i, e.Value)
	}
}

func TestWatchAfterACompactedRevisionShouldExpire(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	all := history(s)
	s.Compact(3)

	for _, after := range []informer.Revision{0, 1, 2} {
		err := s.Watch(context.Background(), after, func(event) error { return nil })
		assert.ErrorIs(t, err, informer.ErrRevisionExpired, "after %d", after)
	}
	assert.Equal(t, all[3:], watchTo(t, s, 3, 5), "after the compacted revision itself")
	assert.Equal(t, all[4:], watchTo(t, s, 4, 5))
}

func TestCompactShouldClampToTheCurrentRevisionAndNeverUndo(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	history(s)
	s.Compact(100) // beyond the current revision: compacts up to 5
	s.Compact(2)   // below the last compaction: does nothing

	err := s.Watch(context.Background(), 4, func(event) error { return nil })
	assert.ErrorIs(t, err, informer.ErrRevisionExpired)

	events, _, _ := watchInBackground(t, s, 5)
	s.Put("after", 6)
	assert.Equal(t, []event{{Type: informer.Put, Key: "after", Value: 6, Revision: 6}}, receive(t, events, 1),
		"changes after a compaction to beyond the revision are kept")
}

func TestWatchShouldResumeFromExactlyTheLastHistoryRevisions(t *testing.T) {
	s := must.Do(memstore.New[string, int](memstore.WithHistory(3)))
	all := history(s) // revisions 1..5; the history holds 3, 4 and 5

	assert.Equal(t, all[2:], watchTo(t, s, 2, 5))
	err := s.Watch(context.Background(), 1, func(event) error { return nil })
	assert.ErrorIs(t, err, informer.ErrRevisionExpired)
}

func TestWatchAfterARevisionBeyondTheStoreShouldExpire(t *testing.T) {
	// Such a revision comes from another store: this program's before a
	// restart, say. Only a relist can be right.
	s := must.Do(memstore.New[string, int]())
	history(s)
	err := s.Watch(context.Background(), 6, func(event) error { return nil })
	assert.ErrorIs(t, err, informer.ErrRevisionExpired)
}

func TestAWatcherThatFallsBehindASmallHistoryShouldExpireAfterTheEventsItHad(t *testing.T) {
	s := must.Do(memstore.New[string, int](memstore.WithHistory(4)))
	all := history(s)
	var got []event
	err := s.Watch(context.Background(), 2, func(e event) error {
		got = append(got, e)
		if len(got) == 1 {
			// A slow handler: meanwhile, writers pass the watcher
			// by more than the history holds. Emit may write.
			for i := range 10 {
				s.Put("busy", i)
			}
		}
		return nil
	})
	require.ErrorIs(t, err, informer.ErrRevisionExpired)
	assert.Equal(t, all[2:], got, "events copied before the writes are still delivered, all correct")
}

func TestWatchShouldReturnPromptlyWhenItsContextIsCancelled(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	history(s)
	events, done, cancel := watchInBackground(t, s, 0)
	receive(t, events, 5) // it is now waiting for a write

	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Watch did not return after cancel")
	}
}

func TestWatchWithADoneContextShouldNotEmit(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	history(s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Watch(ctx, 0, func(e event) error {
		t.Errorf("emitted %v", e)
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestWatchShouldReturnTheErrorOfEmit(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	history(s)
	calls := 0
	err := s.Watch(context.Background(), 0, func(event) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	assert.Same(t, errStop, err)
	assert.Equal(t, 2, calls, "no event after the failing one")
}
