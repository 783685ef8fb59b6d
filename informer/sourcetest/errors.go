package sourcetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// beyond is how far past the store's revision the ExpiredRevision test
// watches: far enough that no other writer of a shared server reaches it.
const beyond = 1 << 40

// ExpiredRevisionIsErrRevisionExpired: Watch after a revision beyond the
// store's returns ErrRevisionExpired (it was issued by another store, or
// by this one before it lost history), and emits nothing. If the Backend
// can Expire: after List at R, two writes and Expire, Watch(R) returns
// ErrRevisionExpired, and a Watch from a List made after Expire emits the
// next write.
func testExpiredRevisionIsErrRevisionExpired[K comparable, V any](t *testing.T, s Suite[K, V]) {
	b := s.newBackend(t)
	k := s.Key(0)
	put(t, b, k, s.Value(0))
	_, rev := list(t, b.Source)

	var emitted []informer.Event[K, V]
	record := func(e informer.Event[K, V]) error { emitted = append(emitted, e); return nil }
	ctx, cancel := context.WithTimeout(t.Context(), s.Wait)
	err := b.Source.Watch(ctx, rev+beyond, record)
	cancel()
	require.ErrorIs(t, err, informer.ErrRevisionExpired, "Watch after %d, beyond the store's revision %d", rev+beyond, rev)
	assert.Empty(t, emitted, "Watch after a revision beyond the store's emitted events")

	if b.Expire == nil {
		t.Log("Backend.Expire is nil: expiry on demand not checked")
		return
	}
	// Two changes: etcd keeps the change at the compaction revision (a
	// watch from it works), so one would still be watchable from rev.
	put(t, b, k, s.Value(1))
	put(t, b, k, s.Value(2))
	require.NoError(t, b.Expire(t.Context()), "Expire")
	emitted = nil
	ctx, cancel = context.WithTimeout(t.Context(), s.Wait)
	err = b.Source.Watch(ctx, rev, record)
	cancel()
	require.ErrorIs(t, err, informer.ErrRevisionExpired, "Watch after %d, listed before Expire", rev)
	checkRevisions(t, rev, emitted)

	listed, rev := list(t, b.Source)
	require.Equal(t, map[K]V{k: s.Value(2)}, listed, "List after Expire: Expire forgets history, not data")
	r := watch(t, b.Source, rev)
	put(t, b, k, s.Value(3))
	ok := r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool {
		return same(fold(listed, events), map[K]V{k: s.Value(3)})
	})
	ended, _ := r.stop(s.Wait)
	assert.True(t, ended, "Watch did not return within %v of its context's cancellation", s.Wait)
	assert.True(t, ok, "Watch from a List after Expire did not emit the next write within %v; %s", s.Wait, r.endedWith())
	checkRevisions(t, rev, r.snapshot())
}

// CancelledContextEndsWatch: cancelling the context ends a Watch within
// Wait with an error that errors.Is context.Canceled, when the watch is
// idle (caught up), when changes stream in, and when the context is done
// before the call; List with a done context fails.
func testCancelledContextEndsWatch[K comparable, V any](t *testing.T, s Suite[K, V]) {
	b := s.newBackend(t)
	_, rev := list(t, b.Source)

	t.Run("Idle", func(t *testing.T) {
		r := watch(t, b.Source, rev)
		put(t, b, s.Key(0), s.Value(0))
		require.True(t, r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool { return len(events) > 0 }),
			"Watch did not emit a Put within %v; %s", s.Wait, r.endedWith())
		ended, err := r.stop(s.Wait)
		require.True(t, ended, "an idle Watch did not return within %v of its context's cancellation", s.Wait)
		assert.ErrorIs(t, err, context.Canceled)
	})

	t.Run("Busy", func(t *testing.T) {
		_, rev := list(t, b.Source)
		r := watch(t, b.Source, rev)
		stop := make(chan struct{})
		var (
			wg       sync.WaitGroup
			once     sync.Once
			writeErr error
		)
		halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if writeErr = b.Put(t.Context(), s.Key(1+i%4), s.Value(100+i)); writeErr != nil {
					return
				}
			}
		})
		defer halt()
		require.True(t, r.waitFor(s.Wait, func(events []informer.Event[K, V]) bool { return len(events) >= 5 }),
			"Watch did not emit 5 events within %v; %s", s.Wait, r.endedWith())
		ended, err := r.stop(s.Wait)
		require.True(t, ended, "a busy Watch did not return within %v of its context's cancellation", s.Wait)
		assert.ErrorIs(t, err, context.Canceled)
		halt()
		assert.NoError(t, writeErr)
	})

	t.Run("DoneBeforeTheCall", func(t *testing.T) {
		_, rev := list(t, b.Source)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		r := watchCtx(t, ctx, b.Source, rev)
		ended, err := r.result(s.Wait)
		require.True(t, ended, "Watch with a done context did not return within %v", s.Wait)
		assert.ErrorIs(t, err, context.Canceled)

		_, _, err = b.Source.List(ctx)
		assert.Error(t, err, "List with a done context")
	})
}

// errEmit is what EmitErrorIsReturned's emit returns.
var errEmit = errors.New("sourcetest: emit failed")

// EmitErrorIsReturned: when emit returns an error, Watch returns it
// (errors.Is), within Wait, and calls emit no more.
func testEmitErrorIsReturned[K comparable, V any](t *testing.T, s Suite[K, V]) {
	b := s.newBackend(t)
	_, rev := list(t, b.Source)
	put(t, b, s.Key(0), s.Value(0))
	put(t, b, s.Key(1), s.Value(1))
	calls := 0
	ctx, cancel := context.WithTimeout(t.Context(), s.Wait)
	defer cancel()
	err := b.Source.Watch(ctx, rev, func(informer.Event[K, V]) error {
		calls++
		return errEmit
	})
	assert.ErrorIs(t, err, errEmit)
	assert.Equal(t, 1, calls, "emit was called again after it failed")
}
