package informer

import (
	"container/heap"
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/converge-go/converge/internal/must"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noSource is a Source that is never run: these tests drive the informer's
// revision by hand, under its lock, as the reflector does.
type noSource struct{}

func (noSource) List(context.Context) ([]Entry[string, int], Revision, error) {
	return nil, 0, errors.New("not run")
}

func (noSource) Watch(context.Context, Revision, func(Event[string, int]) error) error {
	return errors.New("not run")
}

// advance sets lastRev and wakes waiters, as replace and apply do.
func advance(inf *Informer[string, int], rev Revision) {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	inf.lastRev = rev
	inf.wakeWaitersLocked()
}

func waiting(inf *Informer[string, int]) int {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	return len(inf.waiters)
}

func TestWaitersThatGiveUpOrAreStoppedLeaveTheHeap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inf := must.Do(New[string, int]("t", noSource{}))
		ctx, cancel := context.WithCancel(t.Context())
		errs := make(chan error, 3)
		for _, rev := range []Revision{5, 3, 7} {
			go func() { errs <- inf.WaitForRevision(ctx, rev) }()
		}
		stops := []func() bool{
			inf.AfterRevision(4, func() {}),
			inf.AfterRevision(6, func() {}),
		}
		synctest.Wait()
		require.Equal(t, 5, waiting(inf))
		cancel()
		for range 3 {
			require.ErrorIs(t, <-errs, context.Canceled)
		}
		assert.Equal(t, 2, waiting(inf), "cancelled WaitForRevision calls are out")
		for _, stop := range stops {
			require.True(t, stop())
		}
		assert.Zero(t, waiting(inf), "stopped callbacks are out")
	})
}

func TestWaiterHeapPopsByRevisionThenArrival(t *testing.T) {
	inf := must.Do(New[string, int]("t", noSource{}))
	for _, rev := range []Revision{8, 2, 6, 4, 2} {
		inf.addWaiterLocked(&revWaiter{rev: rev, ch: make(chan struct{})})
	}
	type popped struct {
		rev Revision
		seq uint64
	}
	var got []popped
	for inf.waiters.Len() > 0 {
		w := heap.Pop(&inf.waiters).(*revWaiter)
		assert.Equal(t, -1, w.index)
		got = append(got, popped{w.rev, w.seq})
	}
	assert.Equal(t, []popped{{2, 2}, {2, 5}, {4, 4}, {6, 3}, {8, 1}}, got)
}

func TestWakingClosesOnlyTheWaitersAtOrBelowLastRev(t *testing.T) {
	inf := must.Do(New[string, int]("t", noSource{}))
	chs := map[Revision]chan struct{}{}
	for _, rev := range []Revision{8, 2, 6, 4} {
		chs[rev] = make(chan struct{})
		inf.addWaiterLocked(&revWaiter{rev: rev, ch: chs[rev]})
	}
	closed := func(rev Revision) bool {
		select {
		case <-chs[rev]:
			return true
		default:
			return false
		}
	}
	advance(inf, 5)
	assert.True(t, closed(2))
	assert.True(t, closed(4))
	assert.False(t, closed(6))
	assert.False(t, closed(8))
	assert.Equal(t, 2, waiting(inf))
	advance(inf, 3) // a relist back: nothing to wake, nothing un-woken
	assert.Equal(t, 2, waiting(inf))
	advance(inf, 8)
	assert.True(t, closed(6))
	assert.True(t, closed(8))
	assert.Zero(t, waiting(inf))
}
