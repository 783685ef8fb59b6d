package memlock_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/locktest"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

func TestLockShouldSatisfyTheLockContract(t *testing.T) {
	locktest.Run(t, func(*testing.T) leader.Lock { return memlock.NewLock() })
}

func TestHandoverShouldPassOnTheMemoryLock(t *testing.T) {
	shared := memlock.NewLock() // in memory, "one record" is one *Lock
	locktest.Handover(t, func(*testing.T) leader.Lock { return shared })
}

func TestVersionsShouldOnlyGrowAndIgnoreTheCallersVersion(t *testing.T) {
	l := memlock.NewLock()
	v1, err := l.Create(t.Context(), leader.Record{Version: 99})
	require.NoError(t, err)
	assert.Equal(t, int64(1), v1.Version)
	v2, err := l.Update(t.Context(), v1, leader.Record{Version: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(2), v2.Version)
}

func TestLocksShouldSatisfyTheShardBackendContract(t *testing.T) {
	shardtest.RunBackend(t, func(*testing.T) shard.Backend { return memlock.NewLocks() })
}
