package etcdlock_test

import (
	"testing"

	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

func TestLocksShouldSatisfyTheShardBackendContract(t *testing.T) {
	t.Parallel()
	shardtest.RunBackend(t, func(t *testing.T) shard.Backend {
		return etcdlock.NewLocks(newClient(t), uniqueKey(t)+"/")
	})
}
