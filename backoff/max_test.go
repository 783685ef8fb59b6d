package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
)

// recorder is a Limiter with fixed answers that records how it was called.
type recorder struct {
	delay    time.Duration
	requeues int
	whens    []string
	forgets  []string
}

func (r *recorder) When(key string) time.Duration { r.whens = append(r.whens, key); return r.delay }
func (r *recorder) Forget(key string)             { r.forgets = append(r.forgets, key) }
func (r *recorder) NumRequeues(string) int        { return r.requeues }

func TestMaxShouldReturnTheLongestDelayAfterAskingEveryLimiter(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		want   time.Duration
	}{
		{"largest in the middle", []time.Duration{time.Second, 5 * time.Second, 3 * time.Second}, 5 * time.Second},
		{"largest first", []time.Duration{time.Minute, time.Second}, time.Minute},
		{"largest last", []time.Duration{0, time.Second}, time.Second},
		{"single", []time.Duration{time.Millisecond}, time.Millisecond},
		{"all zero", []time.Duration{0, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var limiters []backoff.Limiter[string]
			var recorders []*recorder
			for _, d := range tt.delays {
				r := &recorder{delay: d}
				recorders = append(recorders, r)
				limiters = append(limiters, r)
			}

			assert.Equal(t, tt.want, backoff.Max(limiters...).When("k"))
			for i, r := range recorders {
				// Each must record the failure, even after the max is known.
				assert.Equal(t, []string{"k"}, r.whens, "limiter %d", i)
			}
		})
	}
}

func TestMaxShouldForgetInEveryLimiter(t *testing.T) {
	a, b := &recorder{}, &recorder{}
	backoff.Max[string](a, b).Forget("k")

	assert.Equal(t, []string{"k"}, a.forgets)
	assert.Equal(t, []string{"k"}, b.forgets)
}

func TestMaxShouldReportTheLargestRequeueCount(t *testing.T) {
	m := backoff.Max[string](&recorder{requeues: 2}, &recorder{requeues: 7}, &recorder{requeues: 0})
	assert.Equal(t, 7, m.NumRequeues("k"))
}

func TestMaxOfNothingShouldNeverWait(t *testing.T) {
	m := backoff.Max[string]()
	assert.Zero(t, m.When("k"))
	assert.Zero(t, m.NumRequeues("k"))
	assert.NotPanics(t, func() { m.Forget("k") })
}

func TestMaxShouldPanicAtConstructionOnANilLimiter(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: Max: limiter 1 is nil", func() {
		backoff.Max[string](&recorder{}, nil)
	})
}

func TestMaxShouldNotSeeLaterChangesToTheCallersSlice(t *testing.T) {
	limiters := []backoff.Limiter[string]{&recorder{delay: time.Second}}
	m := backoff.Max(limiters...)
	limiters[0] = &recorder{delay: time.Hour}

	assert.Equal(t, time.Second, m.When("k"))
}

func TestDefaultControllerShouldBackOffPerKeyLikeClientGo(t *testing.T) {
	l := backoff.DefaultController[string](nil)
	ms := time.Millisecond

	for i, want := range []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms} {
		assert.Equal(t, want, l.When("a"), "failure %d", i)
	}
	assert.Equal(t, 4, l.NumRequeues("a"))
	l.Forget("a")
	assert.Zero(t, l.NumRequeues("a"))
	assert.Equal(t, 5*ms, l.When("a"))
}

func TestDefaultControllerShouldLimitTheTotalRateAfterABurstOf100(t *testing.T) {
	l := backoff.DefaultController[int](nil) // the wall clock

	for k := range 100 { // fresh keys, each taking one token of the burst
		assert.Equal(t, 5*time.Millisecond, l.When(k), "key %d", k)
	}
	// Fresh key, so PerKey says 5ms; the empty bucket says about 100ms
	// (10 per second), less what little real time has passed.
	d := l.When(100)
	assert.Greater(t, d, 50*time.Millisecond)
	assert.LessOrEqual(t, d, 100*time.Millisecond)
}

func TestDefaultControllerShouldReturnIndependentLimiters(t *testing.T) {
	a, b := backoff.DefaultController[string](nil), backoff.DefaultController[string](nil)
	a.When("k")
	assert.Zero(t, b.NumRequeues("k"))
}

func TestDefaultControllerShouldSpaceRetriesPastTheBurstExactlyOnItsClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	l := backoff.DefaultController[int](clk)
	for k := range 100 {
		require.Equal(t, 5*time.Millisecond, l.When(k), "key %d", k)
	}
	// No wall time is subtracted: the bucket lives on the fake clock.
	assert.Equal(t, 100*time.Millisecond, l.When(100))
	assert.Equal(t, 200*time.Millisecond, l.When(101))
	clk.Step(150 * time.Millisecond)
	assert.Equal(t, 150*time.Millisecond, l.When(102))
	clk.Step(time.Hour) // refills to the burst, and no further
	for k := range 100 {
		require.Equal(t, 5*time.Millisecond, l.When(1000+k), "key %d after the refill", k)
	}
	assert.Equal(t, 100*time.Millisecond, l.When(2000))
}
