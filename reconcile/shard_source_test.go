package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// startChannelReplica starts a sharded replica whose only source is keys.
func startChannelReplica(t *testing.T, id string, locks shard.Backend, log *shardLog, keys <-chan string) *shardedReplica {
	t.Helper()
	s, err := shard.New(locks, shard.Config{Name: "ints", Identity: id, Buckets: shardBuckets,
		LeaseDuration: bubbleLease, RenewDeadline: bubbleRenew, RetryPeriod: bubbleRetry})
	require.NoError(t, err)
	c, err := reconcile.New("ints", log.reconciler(id, time.Millisecond), reconcile.FromChannel("keys", keys),
		reconcile.WithShards(s), reconcile.WithWorkers(4), quiet)
	require.NoError(t, err)
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddController(c))
	ctx, cancel := context.WithCancel(context.Background())
	r := &shardedReplica{id: id, s: s, c: c, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	return r
}

// Every replica's source delivers every key; each reconciles its own.
// When b leaves, a acquires b's buckets and reconciles the keys of them
// that its source delivered while b held them, although the source does
// not deliver them again.
func TestAKeyFromAChannelShouldBeReconciledByTheNewOwnerWhenItsBucketMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 100
		log := &shardLog{t: t}
		locks := memlock.NewLocks()
		chA, chB := make(chan string), make(chan string)
		a := startChannelReplica(t, "a", locks, log, chA)
		b := startChannelReplica(t, "b", locks, log, chB)
		settled(t, a, b)
		for i := range keys {
			k := fmt.Sprintf("key-%03d", i)
			chA <- k
			chB <- k
		}
		time.Sleep(time.Second)
		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		var ofB []string
		for i := range keys {
			k := fmt.Sprintf("key-%03d", i)
			if owners[shard.BucketOf(k, shardBuckets)] == "b" {
				ofB = append(ofB, k)
				assert.Empty(t, log.of(k, "a"), "%s is b's", k)
			}
		}
		require.NotEmpty(t, ofB)

		b.stop(t)
		settled(t, a)
		time.Sleep(time.Second)
		for _, k := range ofB {
			assert.Len(t, log.of(k, "a"), 1, "%s reconciled once by a after b left", k)
		}
		a.stop(t)
	})
}
