// Package locktest is a conformance suite for leader.Lock implementations:
// every backend's tests call Run so that all locks share one definition of
// compare-and-swap. It imports testify and is meant only for tests.
package locktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
)

// Run checks the Lock contract on fresh, empty locks from newLock: Get
// reports ErrNotFound before the first Create; Create conflicts once a
// record exists; Update succeeds only against the stored Version, assigns a
// new Version, and writes nothing on conflict; every field round-trips;
// exactly one of many concurrent Updates from the same old record wins; a
// done context fails every operation, and an Update on one writes nothing.
func Run(t *testing.T, newLock func(t *testing.T) leader.Lock) {
	t.Run("GetOnAnEmptyLockShouldReportNotFound", func(t *testing.T) {
		_, err := newLock(t).Get(t.Context())
		assert.ErrorIs(t, err, leader.ErrNotFound)
	})

	t.Run("CreateShouldStoreOnceAndConflictAfterwards", func(t *testing.T) {
		l := newLock(t)
		want := sample("a", 1)
		stored, err := l.Create(t.Context(), want)
		require.NoError(t, err)
		assertSame(t, want, stored)
		got, err := l.Get(t.Context())
		require.NoError(t, err)
		assert.Equal(t, stored.Version, got.Version)
		assertSame(t, want, got)

		_, err = l.Create(t.Context(), sample("b", 1))
		assert.ErrorIs(t, err, leader.ErrConflict)
		got, err = l.Get(t.Context())
		require.NoError(t, err)
		assert.Equal(t, stored.Version, got.Version, "a conflicting Create must not write")
	})

	t.Run("UpdateShouldSucceedOnlyAgainstTheStoredVersion", func(t *testing.T) {
		l := newLock(t)
		_, err := l.Update(t.Context(), leader.Record{Version: 1}, sample("a", 1))
		assert.ErrorIs(t, err, leader.ErrConflict, "no record to compare against")

		v1, err := l.Create(t.Context(), sample("a", 1))
		require.NoError(t, err)
		v2, err := l.Update(t.Context(), v1, sample("a", 1))
		require.NoError(t, err)
		assert.NotEqual(t, v1.Version, v2.Version, "every write gets a new Version")

		_, err = l.Update(t.Context(), v1, sample("b", 2))
		assert.ErrorIs(t, err, leader.ErrConflict, "v1 is stale")
		got, err := l.Get(t.Context())
		require.NoError(t, err)
		assert.Equal(t, v2.Version, got.Version, "a conflicting Update must not write")
		assert.Equal(t, "a", got.HolderIdentity)
	})

	t.Run("ExactlyOneOfConcurrentUpdatesShouldWin", func(t *testing.T) {
		l := newLock(t)
		v1, err := l.Create(t.Context(), sample("a", 1))
		require.NoError(t, err)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { _, errs[i] = l.Update(t.Context(), v1, sample("b", leader.Term(2+i))) })
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else {
				assert.ErrorIs(t, err, leader.ErrConflict)
			}
		}
		assert.Equal(t, 1, wins)
	})

	t.Run("OperationsShouldFailOnADoneContext", func(t *testing.T) {
		l := newLock(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := l.Get(ctx)
		assert.Error(t, err)
		_, err = l.Create(ctx, sample("a", 1))
		assert.Error(t, err)
	})

	t.Run("UpdateOnADoneContextShouldFailWithoutWriting", func(t *testing.T) {
		l := newLock(t)
		v1, err := l.Create(t.Context(), sample("a", 1))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = l.Update(ctx, v1, sample("b", 2))
		assert.ErrorIs(t, err, context.Canceled)
		got, err := l.Get(t.Context())
		require.NoError(t, err)
		assertSame(t, v1, got)
		assert.Equal(t, v1.Version, got.Version, "nothing written")
	})
}

// sample is a record with every field set, on whole seconds in UTC so that
// backends that store coarser times still round-trip it.
func sample(holder string, term leader.Term) leader.Record {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return leader.Record{
		HolderIdentity: holder, Term: term, LeaseDuration: 15 * time.Second,
		AcquireTime: at, RenewTime: at.Add(time.Second),
	}
}

// assertSame compares every field but Version, and times as instants.
func assertSame(t *testing.T, want, got leader.Record) {
	t.Helper()
	assert.Equal(t, want.HolderIdentity, got.HolderIdentity)
	assert.Equal(t, want.Term, got.Term)
	assert.Equal(t, want.LeaseDuration, got.LeaseDuration)
	assert.True(t, want.AcquireTime.Equal(got.AcquireTime), "AcquireTime %v, want %v", got.AcquireTime, want.AcquireTime)
	assert.True(t, want.RenewTime.Equal(got.RenewTime), "RenewTime %v, want %v", got.RenewTime, want.RenewTime)
}
