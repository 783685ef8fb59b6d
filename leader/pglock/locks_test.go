package pglock_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader/pglock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

func TestLocksShouldSatisfyTheShardBackendContract(t *testing.T) {
	pool := newPool(t)
	shardtest.RunBackend(t, func(t *testing.T) shard.Backend {
		locks := pglock.NewLocks(pool)
		require.NoError(t, locks.EnsureSchema(t.Context()))
		return shardtest.Prefixed{Backend: locks, Prefix: lockName(t) + "/"}
	})
}
