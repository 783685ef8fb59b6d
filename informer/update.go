package informer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
)

// Op is what Update, CreateOrUpdate or RequestDelete did to the key.
type Op uint8

const (
	// Unchanged: nothing was written; the value read already was as
	// mutate left it (or, for RequestDelete, deletion was already
	// requested). The revision returned is the one read.
	Unchanged Op = iota
	// Created: CreateOrUpdate created the absent key.
	Created
	// Updated: the key was written at the revision read.
	Updated
	// Deleted: the key was deleted at the revision read, by RequestDelete
	// or by the finalizer rule (see Update).
	Deleted
)

// String returns the constant's name, or Op(n) for another value.
func (o Op) String() string {
	switch o {
	case Unchanged:
		return "Unchanged"
	case Created:
		return "Created"
	case Updated:
		return "Updated"
	case Deleted:
		return "Deleted"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// DefaultUpdateAttempts is how many times the helpers read and write before
// they give up with ErrConflict, as client-go's DefaultRetry.
const DefaultUpdateAttempts = 5

// defaultUpdateBackoff is WithUpdateBackoff's default (documented there).
// Unexported, so that a program cannot change every helper's wait from
// afar: a caller that wants another wait says so with the option.
var defaultUpdateBackoff = backoff.Exponential{
	Base:   10 * time.Millisecond,
	Cap:    200 * time.Millisecond,
	Jitter: backoff.FullJitter,
}

// UpdateOption configures Update, CreateOrUpdate and RequestDelete. A bad
// option makes the helper return an error before it reads anything.
type UpdateOption func(*updateConfig)

type updateConfig struct {
	attempts int
	backoff  backoff.Exponential
	clock    clock.Clock
	err      error // the first bad option's
}

// defaultUpdateConfig is shared, read-only, by every call without options,
// so that the common call allocates no config.
var defaultUpdateConfig = updateConfig{
	attempts: DefaultUpdateAttempts,
	backoff:  defaultUpdateBackoff,
	clock:    clock.RealClock{},
}

// WithAttempts sets how many times (n >= 1) the helper reads, mutates and
// writes before it returns ErrConflict; n below 1 is an error.
// WithAttempts(1) never retries. Default: DefaultUpdateAttempts.
func WithAttempts(n int) UpdateOption {
	return func(c *updateConfig) {
		if n < 1 {
			c.fail(fmt.Errorf("informer: WithAttempts: %d attempts, want at least 1", n))
			return
		}
		c.attempts = n
	}
}

// WithUpdateBackoff sets the wait b.Delay(i) before attempt i+2 after a
// conflict. The wait ends early, with ctx's error, if ctx is done. b is
// used as given (its zero fields take package backoff's defaults, not
// this option's default); settings b.Validate rejects are an error. Its
// Rand, if set, must not be shared by concurrent calls.
//
// Default: 10ms doubling up to 200ms, full jitter, so that writers that
// conflicted together do not retry in step. With DefaultUpdateAttempts
// that sleeps at most 10+20+40+80 = 150ms in all before the caller's own
// backoff (a reconcile's requeue) takes over.
func WithUpdateBackoff(b backoff.Exponential) UpdateOption {
	return func(c *updateConfig) {
		if err := b.Validate(); err != nil {
			c.fail(fmt.Errorf("informer: WithUpdateBackoff: %w", err))
			return
		}
		c.backoff = b
	}
}

// WithUpdateClock sets the clock for the waits between attempts and for
// the time RequestDelete records in DeletionRequested. A fake clock
// (k8s.io/utils/clock/testing) makes both deterministic in tests; the clock
// given to informer.WithClock fits. Default: the real clock.
func WithUpdateClock(c clock.Clock) UpdateOption {
	return func(cfg *updateConfig) {
		if c == nil {
			cfg.fail(errors.New("informer: WithUpdateClock: nil clock"))
			return
		}
		cfg.clock = c
	}
}

func (c *updateConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// updateOptions applies opts to a copy of the defaults.
func updateOptions(opts []UpdateOption) (*updateConfig, error) {
	if len(opts) == 0 {
		return &defaultUpdateConfig, nil
	}
	cfg := defaultUpdateConfig
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("informer: nil UpdateOption")
		}
		o(&cfg)
	}
	return &cfg, cfg.err
}

// Update reads key, calls mutate on a copy of its value and, if the copy
// differs from what was read, writes it at the revision read. On
// ErrConflict (someone wrote in between) it reads and mutates again, up to
// the attempts configured (WithAttempts), waiting a jittered backoff
// (WithUpdateBackoff) between attempts; mutate may therefore run once per
// attempt, and must decide from the value it is given each time.
//
// The copy: if V or *V has a method DeepCopy() V or DeepCopy() *V (the
// form deepcopy-gen writes), mutate gets its result. Otherwise it gets a
// shallow copy (of the pointee, if V is a pointer), whose slices, maps and
// pointers still reach the value the store and caches share: mutate must
// replace them, not modify them in place (package object's helpers do so).
//
// Differs: V's or *V's method Equal(V) bool if it has one, else
// reflect.DeepEqual, as controller-runtime's CreateOrUpdate compares.
//
// Generation: if *V (or V, a pointer) implements object.SpecObject, the
// helpers keep its Generation as the Kubernetes API server does: 1 on
// create, plus 1 on a write that changes ObjectSpec or (RequestDelete)
// requests deletion, unchanged on any other write, whatever mutate set
// it to; object.SpecObject says exactly which writes count. For other
// values Generation is written as mutate leaves it.
//
// Finalizer rule: if *V (or V, a pointer) implements object.Object and the
// value after mutate, changed or not, is Deleting with no finalizers left,
// the key is deleted at the revision read instead (Op Deleted), so that
// the Update that removes the last finalizer completes the deletion
// RequestDelete asked for.
//
// It returns the revision written (Unchanged: the one read) and what it
// did. Errors: mutate's error as is, with nothing written; an error
// wrapping ErrNotFound if key is absent; one wrapping ErrConflict once the
// last attempt conflicted; one wrapping ctx.Err() if ctx ends during a
// wait; the store's other errors wrapped (the outcome of a write that
// failed so is unknown: read again).
func Update[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	mutate func(v *V) error, opts ...UpdateOption) (Revision, Op, error) {
	return retry(ctx, s, key, mutate, opUpdate, opts)
}

// CreateOrUpdate is Update, except that an absent key is created, with
// the value mutate makes of the zero V (Op Created). A Create that
// conflicts (the key appeared meanwhile) is retried as an Update. If the
// new value would be Deleting with no finalizers, nothing is written
// (Unchanged, revision 0): the finalizer rule would delete it at once.
func CreateOrUpdate[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	mutate func(v *V) error, opts ...UpdateOption) (Revision, Op, error) {
	return retry(ctx, s, key, mutate, opCreateOrUpdate, opts)
}

// RequestDelete deletes key at the revision read, unless its value is an
// object.Object with finalizers: then it sets DeletionRequested to the
// clock's now, UTC (Op Updated), or, if deletion was already requested,
// writes nothing (Unchanged) and keeps the first request's time. The key
// then stays until the Update that removes its last finalizer deletes it
// (see Update's finalizer rule), so a controller that added its finalizer
// before acting sees the deletion, also if it was down when it was asked
// for.
//
// Deleting at the revision read, not blindly, means a finalizer added
// between the read and the delete is honoured: the delete conflicts, and
// the next attempt sees the finalizer. Retries, errors and the absent key
// (ErrNotFound) are as for Update. A raw Store.Delete bypasses all this.
func RequestDelete[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	opts ...UpdateOption) (Revision, Op, error) {
	return retry(ctx, s, key, nil, opRequestDelete, opts)
}

// conflictError marks the store's ErrConflict on a write, the only error
// retry retries: a mutate function's error is returned as is even if it
// wraps ErrConflict.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return e.err.Error() }
func (e *conflictError) Unwrap() error { return e.err }

// helper is which of the three helpers retry runs.
type helper uint8

const (
	opUpdate helper = iota
	opCreateOrUpdate
	opRequestDelete
)

var helperNames = [...]string{"Update", "CreateOrUpdate", "RequestDelete"}

// retry runs the helper's attempt until it returns something other than a
// write conflict, at most cfg.attempts times, waiting the backoff in
// between. (One function with a switch rather than an attempt closure: a
// closure over ctx, s, key and mutate would be allocated on every call.)
func retry[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	mutate func(*V) error, h helper, opts []UpdateOption) (Revision, Op, error) {
	cfg, err := updateOptions(opts)
	switch {
	case err != nil:
		return 0, Unchanged, err
	case s == nil:
		return 0, Unchanged, fmt.Errorf("informer: %s: nil store", helperNames[h])
	case mutate == nil && h != opRequestDelete:
		return 0, Unchanged, fmt.Errorf("informer: %s: nil mutate function", helperNames[h])
	}
	for i := 0; ; i++ {
		var rev Revision
		var op Op
		if h == opRequestDelete {
			rev, op, err = requestDeleteOnce(ctx, s, key, cfg.clock)
		} else {
			rev, op, err = mutateOnce(ctx, s, key, mutate, h == opCreateOrUpdate)
		}
		// A conflict is the attempt's own *conflictError, never wrapped; a
		// type assertion, not errors.As, so that the success path does
		// not allocate a target.
		conflict, ok := err.(*conflictError)
		if !ok {
			return rev, op, err
		}
		if i+1 >= cfg.attempts {
			return 0, Unchanged, fmt.Errorf("informer: %s %v: %d attempts: %w", helperNames[h], key, cfg.attempts, conflict.err)
		}
		if err := cfg.wait(ctx, i); err != nil {
			return 0, Unchanged, fmt.Errorf("informer: %s %v: waiting to retry after a conflict: %w", helperNames[h], key, err)
		}
	}
}

// wait sleeps the backoff before retry number i (0 for the first), and
// returns ctx's error if ctx is done first.
func (c *updateConfig) wait(ctx context.Context, i int) error {
	d := c.backoff.Delay(i)
	if d <= 0 {
		return ctx.Err()
	}
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// mutateOnce is one attempt of Update (create false) or CreateOrUpdate.
func mutateOnce[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	mutate func(v *V) error, create bool) (Revision, Op, error) {
	cur, rev, ok, err := s.Get(ctx, key)
	if err != nil {
		return 0, Unchanged, fmt.Errorf("informer: get %v: %w", key, err)
	}
	if !ok {
		if !create {
			return 0, Unchanged, fmt.Errorf("informer: update %v: %w", key, ErrNotFound)
		}
		return createOnce(ctx, s, key, mutate)
	}
	next := copyValue(&cur)
	if err := mutate(&next); err != nil {
		return 0, Unchanged, err
	}
	keepGeneration(&cur, &next)
	if m := metaOf(&next); m != nil && m.Deleting() && len(m.Finalizers) == 0 {
		wrev, err := s.Delete(ctx, key, rev)
		return result(wrev, err, Deleted, "delete", key)
	}
	if equalValues(&cur, &next) {
		return rev, Unchanged, nil
	}
	wrev, err := s.Update(ctx, key, next, rev)
	return result(wrev, err, Updated, "update", key)
}

// createOnce creates the absent key from mutate(&zero).
func createOnce[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	mutate func(v *V) error) (Revision, Op, error) {
	var next V
	if err := mutate(&next); err != nil {
		return 0, Unchanged, err
	}
	createdGeneration(&next)
	if m := metaOf(&next); m != nil && m.Deleting() && len(m.Finalizers) == 0 {
		return 0, Unchanged, nil
	}
	wrev, err := s.Create(ctx, key, next)
	return result(wrev, err, Created, "create", key)
}

// requestDeleteOnce is one attempt of RequestDelete.
func requestDeleteOnce[K comparable, V any](ctx context.Context, s ReadWriter[K, V], key K,
	clk clock.PassiveClock) (Revision, Op, error) {
	cur, rev, ok, err := s.Get(ctx, key)
	if err != nil {
		return 0, Unchanged, fmt.Errorf("informer: get %v: %w", key, err)
	}
	if !ok {
		return 0, Unchanged, fmt.Errorf("informer: request delete %v: %w", key, ErrNotFound)
	}
	if m := metaOf(&cur); m == nil || len(m.Finalizers) == 0 {
		wrev, err := s.Delete(ctx, key, rev)
		return result(wrev, err, Deleted, "delete", key)
	} else if m.Deleting() {
		return rev, Unchanged, nil
	}
	next := copyValue(&cur)
	// UTC drops the monotonic reading, which no store keeps, so that the
	// value written equals the value read back.
	nm := metaOf(&next)
	nm.DeletionRequested = clk.Now().UTC()
	if isSpecObject[V]() {
		nm.Generation++ // a graceful deletion changes what is wanted
	}
	wrev, err := s.Update(ctx, key, next, rev)
	return result(wrev, err, Updated, "update", key)
}

// result turns a store write's result into an attempt's: a conflict is
// marked for retry, other errors get the key.
func result[K comparable](rev Revision, err error, op Op, verb string, key K) (Revision, Op, error) {
	switch {
	case err == nil:
		return rev, op, nil
	case errors.Is(err, ErrConflict):
		return 0, Unchanged, &conflictError{err}
	}
	return 0, Unchanged, fmt.Errorf("informer: %s %v: %w", verb, key, err)
}
