package reconcile

import (
	"context"
	"errors"
	"time"
)

// Reconciler drives one key's observed state towards its desired state.
//
// Reconcile is given a key, never an event: it reads the current desired
// state (typically from an informer's cache) and the observed world, and acts
// on the difference. It is called again for a key whenever anything watched
// for that key changes, and may be called for a key whose object is gone, which
// it must treat as "clean up". Calls for different keys run concurrently, up
// to the controller's worker count; calls for one key never overlap.
//
// Its outcome decides what happens next:
//   - nil error, zero Result: done until the key changes again; the key's
//     failure count is reset.
//   - nil error, Result.RequeueAfter > 0: called again for the key after that
//     delay (or sooner, if it changes); the failure count is reset.
//   - an error: called again after the rate limiter's per-key exponential
//     backoff; Result is ignored.
//   - an error wrapped with Terminal: not retried until the key changes;
//     counted in controller_runtime_terminal_reconcile_errors_total.
//   - a panic: recovered, logged with its stack, counted, and retried like
//     an error.
//
// ctx is cancelled when the controller shuts down (after its grace period),
// when leadership is lost, at the per-reconcile timeout, and, with
// WithCancelOnChange, when the key changes again. When the controller runs
// under leader election, ctx carries the term's fencing token
// (leader.TermFromContext).
type Reconciler[K comparable] interface {
	Reconcile(ctx context.Context, key K) (Result, error)
}

// Func returns a Reconciler that calls fn. K is inferred from fn's key
// parameter, so a call site names no type argument:
//
//	reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) { … })
//
// Func(nil) returns a Reconciler that New rejects as nil.
func Func[K comparable](fn func(ctx context.Context, key K) (Result, error)) Reconciler[K] {
	return funcReconciler[K](fn)
}

// funcReconciler is the Reconciler Func returns.
type funcReconciler[K comparable] func(ctx context.Context, key K) (Result, error)

// Reconcile calls f(ctx, key).
func (f funcReconciler[K]) Reconcile(ctx context.Context, key K) (Result, error) { return f(ctx, key) }

// Result is what a successful Reconcile asks for next. The zero Result asks
// for nothing: the key is reconciled again only when it changes.
type Result struct {
	// RequeueAfter, if positive, reconciles the key again after this delay,
	// for state the controller cannot watch (a timeout, an external system
	// polled for progress). The controller may add jitter (WithRequeueJitter).
	// A change to the key before then reconciles it sooner, and the earlier
	// of the two times wins.
	RequeueAfter time.Duration
}

// ErrTerminal is matched, with errors.Is, by every error Terminal returns.
var ErrTerminal = errors.New("terminal error")

// Terminal marks err as terminal: retrying cannot fix it (a spec that can
// never be satisfied, say), so the key is not retried until it changes again.
// The error is logged and counted. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

type terminalError struct{ err error }

func (e terminalError) Error() string { return "terminal: " + e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrTerminal) true for a terminal error, while
// errors.Is and errors.As still reach the wrapped error through Unwrap.
func (e terminalError) Is(target error) bool { return target == ErrTerminal }

// IsTerminal reports whether err, or any error it wraps, was marked Terminal.
func IsTerminal(err error) bool { return errors.Is(err, ErrTerminal) }
