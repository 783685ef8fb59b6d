// Package backoff decides how long a failed reconcile waits before it is
// retried.
//
// [Exponential] computes the delay for the nth retry: Base*Factor^n, capped
// at Cap, optionally jittered so that keys that failed together do not
// retry together. It is a plain value with no state; its zero value gives
// client-go's controller defaults (5ms, doubling, up to 1000s, no jitter).
//
// A [Limiter] turns delays into a retry policy for keys. Its method set is
// that of client-go's workqueue.TypedRateLimiter[K], so limiters move freely
// between converge and client-go or controller-runtime queues; this package
// does not import client-go. The limiters are:
//
//   - [PerKey]: counts each key's consecutive failures and backs it off
//     exponentially, until Forget resets it.
//   - [Bucket]: one token bucket for all keys, bounding the total retry
//     rate however many keys fail.
//   - [Max]: combines limiters, taking the longest delay.
//   - [DefaultController]: Max of PerKey and Bucket with client-go's
//     default settings.
//
// Contracts and edge cases:
//
//   - Delays are never negative and never above the cap, for any attempt
//     and any settings. Arithmetic that would overflow saturates at the cap.
//   - Without jitter, delays never decrease as the attempt number grows.
//   - Invalid settings (negative durations, Factor below 1, Base above Cap)
//     do not make Delay fail: they fall back to usable values, documented
//     on each field, because a retry loop must keep retrying. Use
//     [Exponential.Validate] to reject them up front.
//   - Limiters count a failure on every When call; there is no way to peek.
//   - PerKey keeps memory for every key that has failed and not been
//     forgotten: the caller must Forget keys that succeed or are dropped.
//   - Nothing here starts a goroutine or a timer; a Limiter only computes
//     durations, and the queue does the waiting.
//   - All limiters are safe for concurrent use. An [Exponential] with a
//     seeded Rand is not, unless something (such as PerKey) serialises it.
package backoff
