package queue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/queuetest"
	"github.com/converge-go/converge/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestQueue returns a queue on a fake clock, shut down when the test ends.
func newTestQueue(t *testing.T, opts ...queue.Option) (*queue.Queue[string], *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := must.Do(queue.New[string](append([]queue.Option{queue.WithClock(clk)}, opts...)...))
	t.Cleanup(q.ShutDown)
	return q, clk
}

// get and drain are queuetest's, for this package's string-keyed queues.
var (
	get   = queuetest.Get[string]
	drain = queuetest.Drain[string]
)

func TestAddingAWaitingKeyShouldBeANoOp(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add("a")
	q.Add("b")
	q.Add("a")
	assert.Equal(t, 2, q.Len())
	assert.Equal(t, []string{"a", "b"}, drain(t, q))
}

func TestKeyAddedWhileProcessingShouldRunExactlyOnceMoreAfterDone(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add("a")
	k := get(t, q)
	q.Add("a")
	q.Add("a")
	assert.Equal(t, 0, q.Len(), "a key being processed must not be ready")
	q.Done(k)
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, []string{"a"}, drain(t, q))
	assert.Equal(t, 0, q.Len())
}

func TestDoneOfAKeyThatIsNotProcessingShouldDoNothing(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Done("never-added")
	q.Add("a")
	q.Done("a") // ready, not processing
	assert.Equal(t, []string{"a"}, drain(t, q))
}

func TestShutDownShouldDrainReadyKeysThenReportShutdown(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add("a")
	q.Add("b")
	q.AddAfter("later", time.Minute)
	q.ShutDown()
	assert.True(t, q.ShuttingDown())
	q.Add("c") // ignored
	assert.Equal(t, "a", get(t, q))
	assert.Equal(t, "b", get(t, q))
	_, shutdown := q.Get()
	assert.True(t, shutdown)
}

func TestDoneAfterShutDownShouldStillHandOutAKeyAddedWhileProcessing(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add("a")
	k := get(t, q)
	q.Add("a")
	q.ShutDown()
	q.Done(k)
	assert.Equal(t, "a", get(t, q))
	q.Done("a")
	_, shutdown := q.Get()
	assert.True(t, shutdown)
}

func TestShutDownWithDrainShouldWaitForKeysInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := must.Do(queue.New[string]())
		q.Add("a")
		k, _ := q.Get()
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		synctest.Wait() // ShutDownWithDrain is blocked, or has returned
		require.True(t, q.ShuttingDown())
		select {
		case <-drained:
			t.Fatal("ShutDownWithDrain returned while a key was in flight")
		default:
		}
		q.Done(k)
		<-drained // a deadlock here fails the test: synctest sees it
	})
}

func TestShutDownShouldInterruptAWaitingShutDownWithDrain(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add("a")
	get(t, q)
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	require.Eventually(t, q.ShuttingDown, 5*time.Second, time.Millisecond)
	q.ShutDown()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		t.Fatal("ShutDown did not interrupt ShutDownWithDrain")
	}
}

func TestGetShouldBlockUntilAKeyIsAddedAndReportShutdownWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := must.Do(queue.New[string]())
		got := make(chan string)
		go func() {
			k, _ := q.Get()
			got <- k
		}()
		synctest.Wait() // Get is blocked, or has returned and blocks on got
		select {
		case <-got:
			t.Fatal("Get returned from an empty queue")
		default:
		}
		q.Add("a")
		assert.Equal(t, "a", <-got)
		done := make(chan bool)
		go func() {
			_, shutdown := q.Get()
			done <- shutdown
		}()
		q.ShutDown()
		assert.True(t, <-done)
	})
}

func TestAddAfterShouldWaitForTheClock(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddAfter("a", time.Second)
	assert.Equal(t, 0, q.Len())
	clk.Step(999 * time.Millisecond)
	assert.Equal(t, 0, q.Len())
	clk.Step(time.Millisecond)
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, []string{"a"}, drain(t, q))
}

func TestTimerShouldWakeABlockedGetWhenADelayComesDue(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddAfter("a", time.Second)
	got := make(chan string)
	go func() {
		k, _ := q.Get()
		got <- k
	}()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "the timer goroutine should wait on the clock")
	clk.Step(time.Second)
	select {
	case k := <-got:
		assert.Equal(t, "a", k)
	case <-time.After(5 * time.Second):
		t.Fatal("a due key did not wake Get")
	}
}

func TestAddAfterShouldKeepTheEarliestTime(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddAfter("a", 3*time.Second)
	q.AddAfter("a", time.Second)
	q.AddAfter("a", 5*time.Second)
	clk.Step(time.Second)
	assert.Equal(t, []string{"a"}, drain(t, q))
	clk.Step(10 * time.Second)
	assert.Equal(t, 0, q.Len(), "the later times must not fire again")
}

func TestAddShouldMakeAWaitingKeyReadyNowAndProcessItOnce(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddAfter("a", time.Second)
	q.Add("a")
	assert.Equal(t, []string{"a"}, drain(t, q))
	clk.Step(2 * time.Second)
	assert.Equal(t, 0, q.Len(), "the delayed add must have merged into the plain one")
}

func TestKeysDueTogetherShouldComeOutInTheOrderTheirTimesWereSet(t *testing.T) {
	q, clk := newTestQueue(t)
	for _, k := range []string{"c", "a", "d", "b"} {
		q.AddAfter(k, time.Second)
	}
	clk.Step(time.Second)
	assert.Equal(t, []string{"c", "a", "d", "b"}, drain(t, q))
}

func TestAddAfterWhileProcessingShouldRunAgainOnlyOnceBothDoneAndDue(t *testing.T) {
	q, clk := newTestQueue(t)
	q.Add("a")
	k := get(t, q)
	q.AddAfter("a", time.Second)
	q.Done(k)
	assert.Equal(t, 0, q.Len(), "not due yet")
	clk.Step(time.Second)
	assert.Equal(t, []string{"a"}, drain(t, q))

	// Due while still processing: ready at Done.
	q.Add("a")
	k = get(t, q)
	q.AddAfter("a", time.Second)
	clk.Step(time.Second)
	assert.Equal(t, 0, q.Len())
	q.Done(k)
	assert.Equal(t, []string{"a"}, drain(t, q))
}

func TestHigherPriorityShouldComeFirstAndFIFOWithinAPriority(t *testing.T) {
	q, _ := newTestQueue(t)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "low1", "low2")
	q.Add("n1")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "high1")
	q.Add("n2")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "high2")
	assert.Equal(t, []string{"high1", "high2", "n1", "n2", "low1", "low2"}, drain(t, q))
}

func TestMergingShouldKeepTheHigherPriorityAtTheBackOfItsLine(t *testing.T) {
	q, _ := newTestQueue(t)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "a", "b")
	q.Add("n")
	q.Add("b")                                                           // raised to normal, behind n
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "n") // never lowered
	assert.Equal(t, []string{"n", "b", "a"}, drain(t, q))
}

func TestPriorityOfAReAddWhileProcessingShouldApplyAfterDone(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add("a")
	k := get(t, q)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "a")
	q.Add("b")
	q.Done(k)
	q.Add("c")
	assert.Equal(t, []string{"b", "c", "a"}, drain(t, q))
}

func TestGroupsShouldBeServedRoundRobinWithinAPriority(t *testing.T) {
	tenant := func(k string) string { return k[:1] }
	q, _ := newTestQueue(t, queue.WithGroup(tenant))
	for _, k := range []string{"a1", "a2", "a3", "a4", "b1", "c1", "b2"} {
		q.Add(k)
	}
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "z1")
	assert.Equal(t, []string{"z1", "a1", "b1", "c1", "a2", "b2", "a3", "a4"}, drain(t, q))
}

func TestAddRateLimitedShouldWaitTheLimitersDelayAndForgetShouldResetIt(t *testing.T) {
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Hour})
	q, clk := newTestQueue(t, queue.WithRateLimiter[string](limiter))
	q.AddRateLimited("a") // 1s
	clk.Step(999 * time.Millisecond)
	assert.Equal(t, 0, q.Len())
	clk.Step(time.Millisecond)
	assert.Equal(t, []string{"a"}, drain(t, q))
	q.AddRateLimited("a") // 2s
	assert.Equal(t, 2, q.NumRequeues("a"))
	clk.Step(time.Second)
	assert.Equal(t, 0, q.Len())
	clk.Step(time.Second)
	assert.Equal(t, []string{"a"}, drain(t, q))
	q.Forget("a")
	assert.Equal(t, 0, q.NumRequeues("a"))
	q.AddRateLimited("a") // back to 1s
	clk.Step(time.Second)
	assert.Equal(t, []string{"a"}, drain(t, q))
}

func TestAddWithOptionsRateLimitedShouldWaitTheLongerOfAfterAndTheLimiter(t *testing.T) {
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second})
	q, clk := newTestQueue(t, queue.WithRateLimiter[string](limiter))
	q.AddWithOptions(queue.AddOptions{After: 3 * time.Second, RateLimited: true}, "a")
	clk.Step(2 * time.Second)
	assert.Equal(t, 0, q.Len())
	clk.Step(time.Second)
	assert.Equal(t, 1, q.Len())
}

func TestNewShouldReturnAClearErrorForOptionsThatCannotWork(t *testing.T) {
	intLimiter := backoff.NewPerKey[int](backoff.Exponential{})
	q, err := queue.New[string](queue.WithRateLimiter[int](intLimiter))
	assert.EqualError(t, err,
		"queue.New: WithRateLimiter: got *backoff.PerKey[int], want backoff.Limiter[string]: the option was built for another key type")
	assert.Nil(t, q)
	_, err = queue.New[string](queue.WithGroup(func(int) string { return "" }))
	assert.EqualError(t, err,
		"queue.New: WithGroup: got func(int) string, want func(string) string: the option was built for another key type")
}

func TestPrioritiesBeyondInt32ShouldBeClamped(t *testing.T) {
	q, _ := newTestQueue(t)
	q.AddWithOptions(queue.AddOptions{Priority: 1 << 40}, "huge")
	q.AddWithOptions(queue.AddOptions{Priority: 1 << 31}, "also-max") // same level after clamping: FIFO
	q.AddWithOptions(queue.AddOptions{Priority: -1 << 40}, "tiny")
	q.Add("n")
	assert.Equal(t, []string{"huge", "also-max", "n", "tiny"}, drain(t, q))
}

// waitForTimer returns once the queue's timer goroutine waits on clk, so a
// Step is seen by the timer and not only by the next Get or Len.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
}

func TestShutDownShouldHandOutKeysThatAreDueButNotYetMovedToReady(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddAfter("a", time.Second)
	waitForTimer(t, clk)
	clk.Step(time.Second)
	q.ShutDown()
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, "a", get(t, q))
}

func TestShutDownShouldKeepADelayedReAddThatCameDueWhileProcessing(t *testing.T) {
	q, clk := newTestQueue(t)
	q.Add("a")
	k := get(t, q)
	q.AddAfter("a", time.Second)
	waitForTimer(t, clk)
	clk.Step(time.Second)
	q.ShutDown()
	q.Done(k)
	assert.Equal(t, "a", get(t, q))
}

func TestAddRateLimitedAfterShutDownShouldNotCountAFailure(t *testing.T) {
	q, _ := newTestQueue(t, queue.WithRateLimiter[string](backoff.NewPerKey[string](backoff.Exponential{})))
	q.ShutDown()
	q.AddRateLimited("a")
	assert.Equal(t, 0, q.NumRequeues("a"))
}

func TestIdleShouldMeanNothingReadyAndNothingProcessing(t *testing.T) {
	q, clk := newTestQueue(t)
	assert.True(t, q.Idle())
	q.Add("a")
	assert.False(t, q.Idle(), "a ready key")
	k := get(t, q)
	assert.False(t, q.Idle(), "a key being processed")
	q.Done(k)
	assert.True(t, q.Idle())
	q.AddAfter("b", time.Second)
	assert.True(t, q.Idle(), "a key waiting for its delay does not count")
	clk.Step(time.Second)
	assert.False(t, q.Idle(), "a key is ready from its due time on")
}
