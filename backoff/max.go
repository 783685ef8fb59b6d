package backoff

import (
	"fmt"
	"time"
)

// Max returns a [Limiter] that combines limiters: When returns the longest
// of their delays, Forget forgets key in all of them, and NumRequeues
// returns the largest of their counts. With no limiters, When and
// NumRequeues return 0.
//
// When calls every limiter, not only until it knows the maximum, because
// When records a failure and each limiter must see every failure (a Bucket
// must spend its token, a PerKey must count). This matches client-go's
// TypedMaxOfRateLimiter.
//
// Max panics if a limiter is nil, so that the mistake shows where the
// limiter is built rather than on the first failure inside a worker.
func Max[K comparable](limiters ...Limiter[K]) Limiter[K] {
	for i, l := range limiters {
		if l == nil {
			panic(fmt.Sprintf("backoff: Max: limiter %d is nil", i))
		}
	}
	// Copied so that a caller reusing its slice cannot change ours.
	return maxOf[K](append([]Limiter[K](nil), limiters...))
}

type maxOf[K comparable] []Limiter[K]

func (m maxOf[K]) When(key K) time.Duration {
	var d time.Duration
	for _, l := range m {
		d = max(d, l.When(key))
	}
	return d
}

func (m maxOf[K]) Forget(key K) {
	for _, l := range m {
		l.Forget(key)
	}
}

func (m maxOf[K]) NumRequeues(key K) int {
	var n int
	for _, l := range m {
		n = max(n, l.NumRequeues(key))
	}
	return n
}

// DefaultController returns the limiter a controller uses unless told
// otherwise: the [Max] of a [PerKey] backing each key off from 5ms, doubling
// up to 1000s without jitter, and a [Bucket] of 10 retries per second with
// a burst of 100. These are the settings of client-go's
// DefaultTypedControllerRateLimiter, so a controller ported from client-go
// or controller-runtime retries on the same schedule.
//
// The bucket measures time on clk, which should be the clock of the queue or
// controller the limiter serves (nil means the wall clock): on a fake clock,
// a test that fails more than 100 times sees delays that follow the fake
// clock, not wall time. The per-key half reads no clock.
//
// Each call returns a new limiter with its own state.
func DefaultController[K comparable](clk Clock) Limiter[K] {
	return Max[K](
		NewPerKey[K](Exponential{Base: DefaultBase, Cap: DefaultCap, Factor: DefaultFactor, Jitter: NoJitter}),
		NewBucket[K](10, 100, clk),
	)
}
