package backoff

import (
	"time"

	"golang.org/x/time/rate"
)

// Bucket is a [Limiter] that caps the overall retry rate with one token
// bucket shared by all keys, so that a store outage that fails every key
// does not turn into a retry storm once the per-key delays are short. It is
// the token-bucket half of client-go's default controller rate limiter.
//
// Each When takes a token, whether or not the caller then waits, and returns
// how long until that token is available. Keys are not tracked: Forget does
// nothing and NumRequeues is always 0.
//
// A Bucket is safe for concurrent use.
type Bucket[K comparable] struct {
	// now is the bucket's clock, fixed by NewBucket: unexported so that it
	// cannot change while When reads it from several goroutines.
	now     func() time.Time
	limiter *rate.Limiter
}

var _ Limiter[string] = (*Bucket[string])(nil)

// Clock is the time source of a [Bucket]. The clocks of k8s.io/utils/clock
// (the real one and the fake one of its testing package), and anything with
// a Now method such as a controller's clock, satisfy it.
type Clock interface {
	Now() time.Time
}

// NewBucket returns a Bucket that allows limit retries per second on
// average and bursts of up to burst retries, measured on clk. The bucket
// starts full. A nil clk means the wall clock (time.Now); pass the clock the
// queue or controller runs on, so that a fake clock in tests drives the
// bucket too.
//
// A limit of rate.Inf disables the bucket: When always returns 0. A burst
// below 1 is raised to 1, because with a zero burst rate.Limiter grants no
// tokens at all and every key would wait forever. A limit of 0 or below
// behaves as in rate.Limiter: once the burst is spent, When returns
// rate.InfDuration.
func NewBucket[K comparable](limit rate.Limit, burst int, clk Clock) *Bucket[K] {
	now := time.Now
	if clk != nil {
		now = clk.Now
	}
	return &Bucket[K]{now: now, limiter: rate.NewLimiter(limit, max(burst, 1))}
}

// When takes a token and returns how long from now until it is available;
// 0 while the burst lasts.
func (b *Bucket[K]) When(K) time.Duration {
	t := b.now()
	// ReserveN and DelayFrom take the same t, so the delay is measured on
	// the injected clock and not on time.Now as Reserve().Delay() would.
	return b.limiter.ReserveN(t, 1).DelayFrom(t)
}

// Forget does nothing: the bucket does not track keys.
func (b *Bucket[K]) Forget(K) {}

// NumRequeues returns 0: the bucket does not track keys.
func (b *Bucket[K]) NumRequeues(K) int { return 0 }
