package shard

import "context"

// Handler does the work of the buckets a replica holds: a sharded
// reconcile.Controller is one. Register it with Sharder.Add.
type Handler interface {
	// ServeBucket is called, in its own goroutine, when this replica has
	// acquired b, and runs while it holds it. lease is done when the
	// lease ends: b may then be held elsewhere, so anything still acting
	// on b must stop at once. stop, a child of lease, is done when b must
	// be given up (another replica should own it, or the Sharder is
	// stopping): stop taking b's work, let what is in flight finish
	// within a bound, and return. The lease is renewed, and the bucket
	// handed over, only after every Handler's ServeBucket has returned.
	// ServeBucket should not return before stop is done; both contexts
	// carry b (FromContext). Before starting a piece of b's work, check
	// leader.LeaseValid(lease): a process resumed from a pause runs before
	// its watchdog has cancelled lease, and the check tells it by the
	// local clock that the lease is gone.
	ServeBucket(stop, lease context.Context, b Bucket)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(stop, lease context.Context, b Bucket)

// ServeBucket calls f.
func (f HandlerFunc) ServeBucket(stop, lease context.Context, b Bucket) { f(stop, lease, b) }
