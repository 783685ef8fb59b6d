package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
)

func TestPerKeyShouldDoubleDelayUntilCapThenResetOnForget(t *testing.T) {
	ms := time.Millisecond
	p := backoff.NewPerKey[string](backoff.Exponential{Base: ms, Cap: 10 * ms})

	for i, want := range []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms} {
		assert.Equal(t, i, p.NumRequeues("a"))
		assert.Equal(t, want, p.When("a"), "failure %d", i)
	}
	assert.Equal(t, 6, p.NumRequeues("a"))

	p.Forget("a")
	assert.Equal(t, 0, p.NumRequeues("a"))
	assert.Equal(t, ms, p.When("a"))
	assert.Equal(t, 1, p.NumRequeues("a"))
}

func TestPerKeyShouldBackOffEachKeyIndependently(t *testing.T) {
	ms := time.Millisecond
	p := backoff.NewPerKey[int](backoff.Exponential{Base: ms, Cap: time.Second})

	steps := []struct {
		key  int
		want time.Duration
	}{
		{1, ms}, {1, 2 * ms}, {2, ms}, {1, 4 * ms}, {3, ms}, {2, 2 * ms},
	}
	for i, s := range steps {
		assert.Equal(t, s.want, p.When(s.key), "step %d key %d", i, s.key)
	}
	assert.Equal(t, 3, p.NumRequeues(1))
	assert.Equal(t, 2, p.NumRequeues(2))
	assert.Equal(t, 1, p.NumRequeues(3))

	p.Forget(1)
	assert.Equal(t, 0, p.NumRequeues(1))
	assert.Equal(t, 2, p.NumRequeues(2), "forgetting one key must not touch another")
	assert.Equal(t, 4*ms, p.When(2))
}

func TestPerKeyShouldTreatUnknownKeysAsNeverFailed(t *testing.T) {
	p := backoff.NewPerKey[string](backoff.Exponential{})

	assert.Equal(t, 0, p.NumRequeues("never"))
	assert.NotPanics(t, func() { p.Forget("never") })
	assert.Equal(t, backoff.DefaultBase, p.When("never"))
}

func TestPerKeyShouldCountEveryConcurrentFailureExactlyOnce(t *testing.T) {
	const (
		goroutines = 8
		keys       = 5
		perKey     = 200 // failures per key per goroutine
	)
	tests := []struct {
		name string
		e    backoff.Exponential
	}{
		{"no jitter", backoff.Exponential{Base: 1, Cap: time.Hour, Factor: 1.01}},
		// A seeded Rand is not safe for concurrent use; -race checks that
		// PerKey serialises it.
		{"seeded jitter", backoff.Exponential{Base: 1, Cap: time.Hour, Factor: 1.01, Jitter: backoff.FullJitter, Rand: rand.New(rand.NewPCG(1, 1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := backoff.NewPerKey[string](tt.e)
			var mu sync.Mutex
			got := map[string][]time.Duration{}

			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range keys * perKey {
						key := fmt.Sprint((g + i) % keys)
						d := p.When(key)
						mu.Lock()
						got[key] = append(got[key], d)
						mu.Unlock()
						_ = p.NumRequeues(key)
						p.Forget("other") // concurrent Forget of an unrelated key
					}
				})
			}
			wg.Wait()

			for k := range keys {
				key := fmt.Sprint(k)
				require.Equal(t, goroutines*perKey, p.NumRequeues(key), "key %s", key)
				if tt.e.Jitter != backoff.NoJitter {
					continue
				}
				// Each failure number 0..n-1 was handed out exactly once.
				want := make([]time.Duration, goroutines*perKey)
				for i := range want {
					want[i] = tt.e.Delay(i)
				}
				slices.Sort(got[key])
				assert.Equal(t, want, got[key], "key %s", key)
			}
		})
	}
}
