package backoff

import "time"

// Limiter decides how long a failed key waits before it is retried.
//
// Its method set is identical to client-go's workqueue.TypedRateLimiter[K],
// so every Limiter in this package can be passed to a client-go or
// controller-runtime work queue, and theirs can be passed to converge's
// queue. It is declared here rather than imported so that programs that do
// not talk to Kubernetes do not compile client-go.
//
// Implementations must be safe for concurrent use: a queue calls them from
// every worker.
type Limiter[K comparable] interface {
	// When records a failure of key and returns how long to wait before
	// retrying it. Every call counts: calling When to peek changes the
	// answer of the next call.
	When(key K) time.Duration

	// Forget tells the limiter that key is done, whether it succeeded or
	// was given up on, so it drops what it tracks for key. A key that was
	// never seen is fine.
	Forget(key K)

	// NumRequeues returns how many failures the limiter has recorded for
	// key since it was last forgotten.
	NumRequeues(key K) int
}
