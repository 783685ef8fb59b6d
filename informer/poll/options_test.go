package poll_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
	"github.com/converge-go/converge/internal/must"
)

// recordingClock is a fake clock that reports each wait Watch asks for.
type recordingClock struct {
	*clocktesting.FakeClock
	waits chan time.Duration
}

func newRecordingClock() *recordingClock {
	return &recordingClock{
		FakeClock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)),
		waits:     make(chan time.Duration, 1),
	}
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	c.waits <- d
	return c.FakeClock.NewTimer(d)
}

// nextWaits lets n of a running Watch's waits pass, one poll each, and returns
// their lengths.
func (c *recordingClock) nextWaits(t *testing.T, b *backend, n int) []time.Duration {
	t.Helper()
	var got []time.Duration
	for range n {
		select {
		case d := <-c.waits:
			got = append(got, d)
			awaitTimer(t, c.FakeClock)
			c.Step(d)
			b.awaitList(t)
		case <-time.After(5 * time.Second):
			require.FailNow(t, "Watch did not wait")
		}
	}
	return got
}

func TestEachWaitShouldBeUniformWithinTheJitterBounds(t *testing.T) {
	const jitter = 0.5
	clk := newRecordingClock()
	s, b, _ := newTestSource(t, poll.WithClock(clk), poll.WithJitter(jitter))
	watch(t, s, 0)

	got := clk.nextWaits(t, b, 200)
	lo, hi := time.Duration(float64(interval)*(1-jitter)), time.Duration(float64(interval)*(1+jitter))
	var quarters [4]int
	for _, d := range got {
		require.GreaterOrEqual(t, d, lo)
		require.LessOrEqual(t, d, hi)
		quarters[min(3, int((d-lo)*4/(hi-lo)))]++
	}
	// Uniform: each quarter of the range expects 50 of 200 draws; fewer
	// than 20 has a probability below 1e-8.
	for i, n := range quarters {
		assert.GreaterOrEqual(t, n, 20, "quarter %d of [%v, %v]: %v", i, lo, hi, quarters)
	}
}

func TestWithoutJitterEachWaitShouldBeExactlyTheInterval(t *testing.T) {
	clk := newRecordingClock()
	s, b, _ := newTestSource(t, poll.WithClock(clk), poll.WithJitter(0))
	watch(t, s, 0)
	assert.Equal(t, []time.Duration{interval, interval, interval}, clk.nextWaits(t, b, 3))

	<-clk.waits
	awaitTimer(t, clk.FakeClock)
	clk.Step(interval - time.Nanosecond)
	assert.True(t, clk.HasWaiters(), "the timer fired early")
	clk.Step(time.Nanosecond)
	b.awaitList(t)
}

func TestTheDefaultsShouldBeATenSecondIntervalWithTenPercentJitter(t *testing.T) {
	b := newBackend()
	clk := newRecordingClock()
	s := must.Do(poll.New(b.list, name, poll.WithClock(clk)))
	watch(t, s, 0)
	for _, d := range clk.nextWaits(t, b, 20) {
		assert.GreaterOrEqual(t, d, 9*time.Second)
		assert.LessOrEqual(t, d, 11*time.Second)
	}
}

func TestNewShouldReturnAnErrorForOptionsThatCannotWork(t *testing.T) {
	list := func(context.Context) ([]object, error) { return nil, nil }
	tests := []struct {
		name string
		new  func() (*poll.Source[string, object], error)
		want string
	}{
		{"zero interval",
			func() (*poll.Source[string, object], error) { return poll.New(list, name, poll.WithInterval(0)) },
			"poll.New: WithInterval(0s): the interval must be positive"},
		{"negative jitter",
			func() (*poll.Source[string, object], error) { return poll.New(list, name, poll.WithJitter(-0.1)) },
			"poll.New: WithJitter(-0.1): the fraction must be in [0, 1]"},
		{"jitter above one",
			func() (*poll.Source[string, object], error) { return poll.New(list, name, poll.WithJitter(1.5)) },
			"poll.New: WithJitter(1.5): the fraction must be in [0, 1]"},
		{"NaN jitter",
			func() (*poll.Source[string, object], error) { return poll.New(list, name, poll.WithJitter(math.NaN())) },
			"poll.New: WithJitter(NaN): the fraction must be in [0, 1]"},
		{"WithEqual for another value type",
			func() (*poll.Source[string, object], error) {
				var opt poll.Option[object] = poll.WithEqual(func(a, b string) bool { return a == b })
				return poll.New(list, name, opt)
			},
			"poll.New: WithEqual: got poll.equalOption[string], want func(poll_test.object, poll_test.object) bool: the option was built for another value type"},
		{"nil list",
			func() (*poll.Source[string, object], error) { return poll.New[string, object](nil, name) },
			"poll.New: list and key must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.new()
			assert.EqualError(t, err, tt.want)
			assert.Nil(t, s)
		})
	}
}

func TestANilEqualShouldKeepTheDefault(t *testing.T) {
	_, err := poll.New(func(context.Context) ([]object, error) { return nil, nil }, name, poll.WithEqual[object](nil))
	assert.NoError(t, err)
}

func TestNewEntriesShouldReturnAnErrorForANilListOrABadOption(t *testing.T) {
	s, err := poll.NewEntries[string, object](nil)
	assert.EqualError(t, err, "poll.NewEntries: list must not be nil")
	assert.Nil(t, s)
	list := func(context.Context) ([]informer.Entry[string, object], error) { return nil, nil }
	_, err = poll.NewEntries(list, poll.WithInterval(-time.Second))
	assert.EqualError(t, err, "poll.NewEntries: WithInterval(-1s): the interval must be positive")
	_, err = poll.NewEntries(list, nil)
	assert.EqualError(t, err, "poll.NewEntries: option 0 is nil")
}
