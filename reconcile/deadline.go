package reconcile

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// reconcileContext returns the context of one reconcile: workCtx, bounded by
// the reconcile timeout if there is one, and cancellable with cancel (with
// WithCancelOnChange; otherwise cancel is nil). release frees what it holds
// and must be called when the reconcile has returned.
func (r *run[K]) reconcileContext() (ctx context.Context, cancel context.CancelCauseFunc, release func()) {
	ctx, release = r.workCtx, noRelease
	timeout := r.c.s.timeout
	if timeout > 0 && isRealClock(r.c.s.clock) {
		// The standard deadline: Err is DeadlineExceeded for ctx and for
		// every context derived from it.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, timeout)
		release = stop
		timeout = 0
	}
	if timeout == 0 && r.inflight == nil {
		return ctx, nil, release
	}
	// A local, not the named result: a result captured by the closures
	// below would be moved to the heap on every call, the fast path's too.
	inner, cancelInner := context.WithCancelCause(ctx)
	ctx = inner
	if timeout > 0 {
		// An injected clock drives the timeout, so that a fake clock
		// decides when it passes.
		t := r.c.s.clock.AfterFunc(timeout, func() { cancelInner(context.DeadlineExceeded) })
		ctx = deadlineContext{Context: inner, deadline: time.Now().Add(timeout)}
		prev := release
		release = func() { t.Stop(); prev() }
	}
	prev := release
	return ctx, cancelInner, func() { cancelInner(nil); prev() }
}

// noRelease releases nothing. A func literal in a generic method would
// carry the method's type dictionary, and so be allocated at each call.
func noRelease() {}

func isRealClock(c Clock) bool {
	switch c.(type) {
	case clock.RealClock, *clock.RealClock:
		return true
	}
	return false
}

// deadlineContext is a context cancelled by an injected clock (with cause
// context.DeadlineExceeded) that reports the deadline as the wall-clock
// instant it would pass if that clock kept real time: clients that read
// Deadline (gRPC, net/http, pgx) need a wall-clock time, and a fake clock's
// instant is meaningless to them.
type deadlineContext struct {
	context.Context
	deadline time.Time
}

func (c deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Err reports DeadlineExceeded once the injected clock ended the context.
// Contexts derived from c report Canceled with the cause DeadlineExceeded:
// only the standard library's own deadline reaches its descendants.
func (c deadlineContext) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// Causes of cancelled reconciles, the cause label of
// converge_reconcile_cancelled_errors_total.
const (
	cancelChanged    = "changed"
	cancelBucketLost = "bucket_lost"
	cancelShutdown   = "shutdown"
)

var cancelledMessages = map[string]string{
	cancelChanged:    "reconcile cancelled because its key changed; its error is not a failure",
	cancelBucketLost: "reconcile cancelled because its shard bucket was lost; its error is not a failure",
	cancelShutdown:   "reconcile cancelled by the shutdown; its error is not a failure",
}

// cancelled says why a reconcile's context was cancelled by the controller
// rather than by the reconcile's own budget, or "" if it was not. Its
// outcome is then no failure and nothing to retry here:
//   - changed (WithCancelOnChange): the change has queued the key again;
//   - bucket_lost (WithShards): the bucket is another replica's now, which
//     reconciles the key;
//   - shutdown: Run's context is done and the grace is over (or leadership
//     was lost); the next Run, here or on the next leader, reconciles every
//     key.
//
// A reconcile that returns an error on its own during the shutdown grace,
// its context still live, is a failure like any other.
func (r *run[K]) cancelled(ctx context.Context) string {
	if ctx.Err() == nil {
		return ""
	}
	cause := context.Cause(ctx)
	switch {
	case r.inflight != nil && errors.Is(cause, errChanged):
		return cancelChanged
	case r.c.shards != nil && errors.Is(cause, ErrBucketLost):
		return cancelBucketLost
	case r.stopping.Load() && r.workCtx.Err() != nil:
		return cancelShutdown
	}
	return ""
}
