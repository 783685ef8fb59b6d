package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/backoff"
)

// fakeClock is advanced by hand, so bucket tests need no sleeps. The bucket
// reads it from a single goroutine in these tests, so it has no lock.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func newFakeBucket(limit rate.Limit, burst int) (*backoff.Bucket[string], *fakeClock) {
	clock := &fakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	return backoff.NewBucket[string](limit, burst, clock), clock
}

func TestBucketShouldAllowTheBurstThenSpaceRetriesAtTheLimit(t *testing.T) {
	b, clock := newFakeBucket(10, 3)
	ms := time.Millisecond

	for i := range 3 {
		assert.Zero(t, b.When("a"), "burst retry %d", i)
	}
	// Every When takes a token, so waits stack up 1/limit apart.
	assert.Equal(t, 100*ms, b.When("b"))
	assert.Equal(t, 200*ms, b.When("c"))

	clock.Advance(200 * ms) // pays back the two borrowed tokens
	assert.Equal(t, 100*ms, b.When("a"))

	clock.Advance(50 * ms)
	assert.Equal(t, 150*ms, b.When("a"))
}

func TestBucketShouldRefillOnlyUpToTheBurstWhenIdle(t *testing.T) {
	b, clock := newFakeBucket(10, 3)
	for range 3 {
		b.When("a")
	}

	clock.Advance(time.Hour)
	for i := range 3 {
		assert.Zero(t, b.When("a"), "retry %d after idling", i)
	}
	assert.Equal(t, 100*time.Millisecond, b.When("a"))
}

func TestBucketShouldNotTrackKeys(t *testing.T) {
	b, _ := newFakeBucket(10, 1)
	b.When("a")
	b.When("a")

	assert.Zero(t, b.NumRequeues("a"))
	b.Forget("a")
	// Forget must not give back tokens: the bucket bounds the total rate.
	assert.Equal(t, 200*time.Millisecond, b.When("a"))
}

func TestBucketEdgeSettings(t *testing.T) {
	tests := []struct {
		name  string
		limit rate.Limit
		burst int
		want  []time.Duration
	}{
		{"infinite limit never waits", rate.Inf, 0, []time.Duration{0, 0, 0, 0}},
		{"zero burst is raised to one", 10, 0, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}},
		{"negative burst is raised to one", 10, -5, []time.Duration{0, 100 * time.Millisecond}},
		{"zero limit waits forever after the burst", 0, 2, []time.Duration{0, 0, rate.InfDuration}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newFakeBucket(tt.limit, tt.burst)
			for i, want := range tt.want {
				assert.Equal(t, want, b.When("k"), "call %d", i)
			}
		})
	}
}

func TestBucketShouldUseTheWallClockWhenGivenNone(t *testing.T) {
	b := backoff.NewBucket[string](1, 1, nil)

	assert.Zero(t, b.When("a"))
	d := b.When("a")
	assert.Greater(t, d, 900*time.Millisecond)
	assert.LessOrEqual(t, d, time.Second)
}
