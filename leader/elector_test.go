package leader_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run inside a synctest bubble only to know when the electors'
// goroutines are idle (synctest.Wait); all time comes from the fake clock,
// stepped by the test in tick increments, so every timestamp is exact.
const (
	lease = 15 * time.Second
	renew = 10 * time.Second
	retry = 2 * time.Second
	tick  = 100 * time.Millisecond
)

// faultyLock wraps a shared Lock for one elector: while failing is set its
// Updates fail, while hanging is set they block until cancelled. It records the fake time of each successful Update.
type faultyLock struct {
	leader.Lock
	clk       *clocktesting.FakeClock
	failing   atomic.Bool
	hanging   atomic.Bool // Updates block until their context is done
	mu        sync.Mutex
	lastWrite time.Time
}

var errInjected = errors.New("injected failure")

func (l *faultyLock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	if l.failing.Load() {
		return leader.Record{}, errInjected
	}
	if l.hanging.Load() {
		<-ctx.Done()
		return leader.Record{}, ctx.Err()
	}
	stored, err := l.Lock.Update(ctx, old, r)
	if err == nil {
		l.mu.Lock()
		l.lastWrite = l.clk.Now()
		l.mu.Unlock()
	}
	return stored, err
}

func (l *faultyLock) lastSuccessfulWrite() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastWrite
}

// term is one term as seen by OnStartedLeading.
type term struct {
	token     leader.Term
	started   time.Time
	cancelled time.Time // zero until the leader's context is done
}

// candidate is a running elector with its own faulty view of the lock.
type candidate struct {
	*leader.Elector
	lock   *faultyLock
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	terms []term
}

func (c *candidate) termsSoFar() []term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]term(nil), c.terms...)
}

func (c *candidate) stop() {
	c.cancel()
	synctest.Wait()
	<-c.done
}

type cluster struct {
	t    *testing.T
	clk  *clocktesting.FakeClock
	lock *memlock.Lock
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, clk: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), lock: memlock.NewLock()}
}

// start runs an elector with identity id and test timings (no jitter),
// after mutate, if not nil, has adjusted its Config. Its default
// OnStartedLeading records each term and when its context was cancelled.
func (cl *cluster) start(id string, mutate func(*leader.Config)) *candidate {
	c := &candidate{lock: &faultyLock{Lock: cl.lock, clk: cl.clk}, done: make(chan struct{})}
	cfg := leader.Config{
		Identity: id, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, JitterFactor: 1,
		Clock: cl.clk,
		OnStartedLeading: func(ctx context.Context) {
			tok, ok := leader.TermFromContext(ctx)
			assert.True(cl.t, ok, "the leader's context carries its term")
			c.mu.Lock()
			c.terms = append(c.terms, term{token: tok, started: cl.clk.Now()})
			i := len(c.terms) - 1
			c.mu.Unlock()
			<-ctx.Done()
			c.mu.Lock()
			c.terms[i].cancelled = cl.clk.Now()
			c.mu.Unlock()
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := leader.New(c.lock, cfg)
	require.NoError(cl.t, err)
	c.Elector = e
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		assert.NoError(cl.t, e.Run(ctx))
	}()
	synctest.Wait()
	return c
}

// advance steps the clock by d in ticks, letting the electors settle after
// each, and calls each (if not nil) after every tick.
func (cl *cluster) advance(d time.Duration, each func()) {
	for elapsed := time.Duration(0); elapsed < d; elapsed += tick {
		cl.clk.Step(tick)
		synctest.Wait()
		if each != nil {
			each()
		}
	}
}

// until steps the clock until cond holds, failing after limit.
func (cl *cluster) until(limit time.Duration, cond func() bool) {
	for elapsed := time.Duration(0); !cond(); elapsed += tick {
		require.Less(cl.t, elapsed, limit, "condition not reached in time")
		cl.clk.Step(tick)
		synctest.Wait()
	}
}

func leaders(cs ...*candidate) int {
	n := 0
	for _, c := range cs {
		if c.IsLeader() {
			n++
		}
	}
	return n
}

func TestTwoElectorsOnOneLockShouldHaveExactlyOneLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b := cl.start("a", nil), cl.start("b", nil)
		defer a.stop()
		defer b.stop()

		require.Equal(t, 1, leaders(a, b))
		cl.advance(3*lease, func() { require.Equal(t, 1, leaders(a, b), "at %v", cl.clk.Now()) })
		assert.True(t, a.IsLeader(), "the first elector keeps renewing")
		assert.Equal(t, "a", a.Leader())
		assert.Equal(t, "a", b.Leader())
		assert.Equal(t, leader.Term(1), a.termsSoFar()[0].token)
	})
}

func TestFailingRenewalsShouldCancelTheLeaderByTheRenewDeadlineAndBeforeAnyoneElseAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a := cl.start("a", nil)
		b := cl.start("b", nil)
		defer a.stop()
		defer b.stop()
		cl.advance(5*time.Second+tick, nil) // a renewed at least once; off the retry grid

		a.lock.failing.Store(true)
		cl.until(lease+renew, func() bool { return len(b.termsSoFar()) == 1 })

		lastRenew := a.lock.lastSuccessfulWrite()
		aTerm, bTerm := a.termsSoFar()[0], b.termsSoFar()[0]
		require.False(t, aTerm.cancelled.IsZero(), "a's context was cancelled")
		assert.LessOrEqual(t, aTerm.cancelled.Sub(lastRenew), renew, "cancelled no later than RenewDeadline after the last renewal")
		assert.True(t, aTerm.cancelled.Before(bTerm.started), "cancelled strictly before b acquired")
		assert.GreaterOrEqual(t, bTerm.started.Sub(lastRenew), lease, "b waited a full lease after the last change it could have seen")
		assert.Greater(t, bTerm.token, aTerm.token)
		assert.False(t, a.IsLeader())
		cl.advance(retry, nil)
		assert.Equal(t, "b", a.Leader(), "a, now a candidate, sees b at its next attempt")
	})
}

func TestTermsShouldStrictlyIncreaseAcrossHandovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b := cl.start("a", nil), cl.start("b", nil)
		defer a.stop()
		defer b.stop()

		cur, next := a, b
		for range 4 {
			want := len(next.termsSoFar()) + 1
			cur.lock.failing.Store(true)
			cl.until(2*lease, func() bool { return len(next.termsSoFar()) == want })
			cur.lock.failing.Store(false)
			cur, next = next, cur
		}

		var all []term
		all = append(all, a.termsSoFar()...)
		all = append(all, b.termsSoFar()...)
		require.Len(t, all, 5)
		seen := map[leader.Term]bool{}
		for _, tm := range all {
			assert.False(t, seen[tm.token], "term %d handed out twice", tm.token)
			seen[tm.token] = true
		}
		for _, c := range []*candidate{a, b} {
			ts := c.termsSoFar()
			for i := 1; i < len(ts); i++ {
				assert.Greater(t, ts[i].token, ts[i-1].token)
			}
		}
		assert.True(t, seen[5], "one term per acquisition: 1 to 5")
	})
}

func TestReleaseOnCancelShouldLetAnotherTakeOverWithinOneRetryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		release := func(c *leader.Config) { c.ReleaseOnCancel = true }
		a, b := cl.start("a", release), cl.start("b", release)
		defer b.stop()
		cl.advance(3*time.Second+tick, nil)

		cancelledAt := cl.clk.Now()
		a.stop()
		assert.False(t, a.IsLeader())
		cl.until(retry, func() bool { return b.IsLeader() })
		assert.LessOrEqual(t, b.termsSoFar()[0].started.Sub(cancelledAt), retry)
	})
}

func TestWithoutReleaseOnCancelOthersShouldWaitForTheLeaseToExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b := cl.start("a", nil), cl.start("b", nil)
		defer b.stop()
		a.stop()
		cl.advance(lease-retry, func() { require.False(t, b.IsLeader()) })
		cl.until(2*retry, func() bool { return b.IsLeader() })
	})
}

func TestTermFromContextShouldReportFalseOutsideATerm(t *testing.T) {
	_, ok := leader.TermFromContext(context.Background())
	assert.False(t, ok)
}

func TestCheckShouldFailWhileATermRunsPastItsRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		stuck := make(chan struct{})
		a := cl.start("a", func(c *leader.Config) {
			c.OnStartedLeading = func(ctx context.Context) { <-stuck } // ignores ctx
		})
		defer a.stop()

		require.True(t, a.IsLeader())
		cl.advance(3*retry, func() { require.NoError(t, a.Check()) })
		a.lock.failing.Store(true)
		cl.until(renew+retry, func() bool { return !a.IsLeader() })
		assert.NoError(t, a.Check(), "at the deadline itself, still healthy")
		cl.advance(tick, nil)
		assert.ErrorContains(t, a.Check(), "more than RenewDeadline")

		close(stuck)
		synctest.Wait()
		assert.NoError(t, a.Check(), "the term's work has returned")
	})
}

func TestCallbacksShouldReportNewLeadersAndStoppedLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		var mu sync.Mutex
		var events []string
		record := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
		a := cl.start("a", nil)
		b := cl.start("b", func(c *leader.Config) {
			c.OnNewLeader = func(id string) { record("new " + id) }
			c.OnStartedLeading = func(ctx context.Context) { record("started"); <-ctx.Done() }
			c.OnStoppedLeading = func() { record("stopped") }
		})
		a.stop()
		cl.until(2*lease, func() bool { return b.IsLeader() })
		b.stop()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"new a", "new b", "started", "stopped"}, events)
	})
}

func TestRunShouldRefuseASecondCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a := cl.start("a", nil)
		defer a.stop()
		assert.Error(t, a.Run(t.Context()))
	})
}

func TestACandidateShouldJudgeExpiryByItsOwnObservationNotTheRecordsTimestamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		// A holder that died long ago by its own (skewed) wall clock.
		old := cl.clk.Now().Add(-time.Hour)
		_, err := cl.lock.Create(t.Context(), leader.Record{
			HolderIdentity: "ghost", Term: 7, LeaseDuration: lease, AcquireTime: old, RenewTime: old,
		})
		require.NoError(t, err)

		startedAt := cl.clk.Now()
		b := cl.start("b", nil)
		defer b.stop()
		assert.Equal(t, "ghost", b.Leader())
		cl.advance(lease-tick, func() { require.False(t, b.IsLeader(), "at %v", cl.clk.Since(startedAt)) })
		cl.until(retry, func() bool { return b.IsLeader() })
		assert.Equal(t, leader.Term(8), b.termsSoFar()[0].token, "the term continues from the record's")
	})
}

func TestAHangingRenewalShouldNotDelayTheCancellationPastTheRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a := cl.start("a", nil)
		defer a.stop()
		cl.advance(3*time.Second, nil)

		a.lock.hanging.Store(true)
		cl.until(renew+retry, func() bool { return !a.IsLeader() })
		lastRenew := a.lock.lastSuccessfulWrite()
		assert.Equal(t, lastRenew.Add(renew), a.termsSoFar()[0].cancelled, "the watchdog, not the blocked call, ends the term")
	})
}

// drainingWork is an OnStartedLeading that, once its context is cancelled,
// goes on for drain of fake time (a reconcile finishing within its
// shutdown grace) and records when it was cancelled and when it returned.
type drainingWork struct {
	clk   *clocktesting.FakeClock
	drain time.Duration

	mu                  sync.Mutex
	cancelled, returned time.Time
}

func (w *drainingWork) run(ctx context.Context) {
	<-ctx.Done()
	w.mu.Lock()
	w.cancelled = w.clk.Now()
	w.mu.Unlock()
	<-w.clk.After(w.drain)
	w.mu.Lock()
	w.returned = w.clk.Now()
	w.mu.Unlock()
}

func (w *drainingWork) times() (cancelled, returned time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancelled, w.returned
}

func TestCancellingRunShouldKeepRenewingTheLeaseUntilTheLeadersWorkHasReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		work := &drainingWork{clk: cl.clk, drain: 3 * lease} // far longer than a lease
		a := cl.start("a", func(c *leader.Config) {
			c.ReleaseOnCancel = true
			c.OnStartedLeading = work.run
		})
		b := cl.start("b", func(c *leader.Config) { c.ReleaseOnCancel = true })
		defer b.stop()
		cl.advance(3*time.Second+tick, nil)
		require.True(t, a.IsLeader())

		stoppedAt := cl.clk.Now()
		a.cancel()
		synctest.Wait()
		cancelled, _ := work.times()
		assert.Equal(t, stoppedAt, cancelled, "the leader's context is cancelled at once")
		assert.False(t, a.IsLeader(), "a leader told to stop does not lead")
		cl.until(work.drain+tick, func() bool {
			_, returned := work.times()
			if returned.IsZero() {
				require.Empty(t, b.termsSoFar(), "b acquired at %v while a's work was still running", cl.clk.Since(stoppedAt))
				require.NoError(t, a.Check(), "a renews while its work finishes")
			}
			return !returned.IsZero()
		})
		_, returned := work.times()
		assert.Equal(t, stoppedAt.Add(work.drain), returned)
		<-a.done
		cl.until(retry, func() bool { return b.IsLeader() })
		assert.LessOrEqual(t, b.termsSoFar()[0].started.Sub(returned), retry, "a released the lock once its work returned")
	})
}

func TestFailingRenewalsWhileTheWorkFinishesShouldEndTheLeaseByTheRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		work := &drainingWork{clk: cl.clk, drain: 3 * lease}
		a := cl.start("a", func(c *leader.Config) { c.OnStartedLeading = work.run })
		b := cl.start("b", nil)
		defer b.stop()
		cl.advance(3*time.Second+tick, nil)

		a.cancel()
		cl.advance(2*retry, nil) // renewals go on after the cancellation
		a.lock.failing.Store(true)
		cl.until(lease+renew, func() bool { return len(b.termsSoFar()) == 1 })
		lastRenew := a.lock.lastSuccessfulWrite()
		assert.GreaterOrEqual(t, b.termsSoFar()[0].started.Sub(lastRenew), lease, "b waited a full lease after a's last renewal")
		assert.ErrorContains(t, a.Check(), "more than RenewDeadline", "a's work outlives its lease")
		cl.until(work.drain, func() bool { _, returned := work.times(); return !returned.IsZero() })
		<-a.done
	})
}
