package shard_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
)

// A member that never returns (its record was left by a crash) is deleted
// ForgetAfter after its lease expired, by a replica still running; a live
// member's record is kept.
func TestTheRecordOfAMemberThatNeverReturnsShouldBeDeletedAfterForgetAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const l = 2 * time.Second
		locks := memlock.NewLocks()
		ghost := locks.Lock("w/members/ghost")
		_, err := ghost.Create(t.Context(), leader.Record{HolderIdentity: "ghost", LeaseDuration: l})
		require.NoError(t, err)
		start := func(id string) func() {
			s, err := shard.New(locks, shard.Config{Name: "w", Identity: id, Buckets: 4,
				LeaseDuration: l, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
				ForgetAfter: 3 * l})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = s.Run(ctx) }()
			return func() { cancel(); <-done }
		}
		stopA, stopB := start("a"), start("b")
		exists := func(lk leader.Lock) bool {
			_, err := lk.Get(t.Context())
			if errors.Is(err, leader.ErrNotFound) {
				return false
			}
			require.NoError(t, err)
			return true
		}

		time.Sleep(l + 3*l - time.Second) // expired, not yet forgotten
		assert.True(t, exists(ghost), "kept until LeaseDuration+ForgetAfter")
		time.Sleep(2 * time.Second) // + one list
		assert.False(t, exists(ghost), "deleted once LeaseDuration+ForgetAfter passed")
		assert.True(t, exists(locks.Lock("w/members/a")), "a live member is kept")
		assert.True(t, exists(locks.Lock("w/members/b")), "a live member is kept")

		stopB() // a graceful leave releases b's record: forgotten as well
		time.Sleep(l + 3*l + time.Second)
		assert.False(t, exists(locks.Lock("w/members/b")))
		assert.True(t, exists(locks.Lock("w/members/a")))
		stopA()
	})
}

func TestAMemberRecordThatChangedShouldNotBeDeleted(t *testing.T) {
	locks := memlock.NewLocks()
	lk := locks.Lock("m")
	r, err := lk.Create(t.Context(), leader.Record{HolderIdentity: "x"})
	require.NoError(t, err)
	_, err = lk.Update(t.Context(), r, leader.Record{HolderIdentity: "x"})
	require.NoError(t, err)
	assert.ErrorIs(t, locks.Delete(t.Context(), "m", r.Version), leader.ErrConflict)
	_, err = lk.Get(t.Context())
	assert.NoError(t, err)
}
