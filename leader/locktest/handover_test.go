package locktest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/locktest"
	"github.com/converge-go/converge/leader/memlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandoverShouldPassOnTheMemoryLock(t *testing.T) {
	l := memlock.NewLock()
	locktest.Handover(t, func(*testing.T) leader.Lock { return l })
}

// stallingLock blocks every Update from the first one on for stall, or
// until its context is done: a renewal stalled on a loaded machine or a
// slow backend.
type stallingLock struct {
	leader.Lock
	stall time.Duration
	until atomic.Pointer[time.Time] // set by the first Update
}

func (l *stallingLock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	end := time.Now().Add(l.stall)
	l.until.CompareAndSwap(nil, &end)
	if wait := time.Until(*l.until.Load()); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return leader.Record{}, ctx.Err()
		case <-t.C:
		}
	}
	return l.Lock.Update(ctx, old, r)
}

func TestHandoverShouldNotMistakeAMomentWithoutALeaderForAFailure(t *testing.T) {
	l := memlock.NewLock()
	calls := 0
	locktest.Handover(t, func(*testing.T) leader.Lock {
		calls++
		if calls == 1 {
			// The first elector creates the record and leads; its first
			// renewal stalls past RenewDeadline, and so does its attempt to
			// take the record back, until the second takes it over: for a
			// while, nobody leads.
			return &stallingLock{Lock: l, stall: 2500 * time.Millisecond}
		}
		return l
	})
}
