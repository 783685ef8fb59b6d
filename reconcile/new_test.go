package reconcile_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// A New whose metrics cannot be registered must leave nothing behind: a
// later, correct New over the same child informer is accepted.
func TestANewWhoseMetricsFailShouldLeaveNoOwnerIndexBehind(t *testing.T) {
	rs := must.Do(informer.New("rs", must.Do(memstore.New[string, int]())))
	pods := must.Do(informer.New("pods", must.Do(memstore.New[string, pod]())))
	reg := prometheus.NewRegistry()
	_, err := reconcile.New("rs", &keyLog{}, reconcile.For(rs), reconcile.WithMetrics(reg))
	require.NoError(t, err)

	_, err = reconcile.New("rs", &keyLog{}, reconcile.For(rs), reconcile.Owns(pods, podOwner), reconcile.WithMetrics(reg))
	require.ErrorContains(t, err, "already registered", "the same name on the same registry")
	assert.False(t, pods.HasIndex(reconcile.OwnerIndexOf("rs")), "the failed New added no index")

	_, err = reconcile.New("rs", &keyLog{}, reconcile.For(rs), reconcile.Owns(pods, podOwner),
		reconcile.WithMetrics(prometheus.NewRegistry()))
	assert.NoError(t, err, "a correct New is accepted")
}

// The second of two Owns fails on a child whose cached entry makes its
// owner function panic: the first Owns's index is removed again.
func TestANewWhoseSecondOwnsFailsShouldRemoveTheFirstOwnsIndex(t *testing.T) {
	pods := must.Do(informer.New("pods", must.Do(memstore.New[string, pod]())))
	bad := must.Do(memstore.New[string, pod]())
	bad.Put("b1", pod{owner: "x"})
	badInf := must.Do(informer.New("bad", bad))
	runInformer(t, badInf)
	_, err := reconcile.New("rs", &keyLog{}, reconcile.Owns(pods, podOwner),
		reconcile.Owns(badInf, func(string, pod) (string, bool) { panic("boom") }))
	require.ErrorContains(t, err, "boom")
	assert.False(t, pods.HasIndex(reconcile.OwnerIndexOf("rs")), "the first Owns's index was removed")
	assert.False(t, badInf.HasIndex(reconcile.OwnerIndexOf("rs")))
}

// A sharded New that fails must not stay registered with the Sharder: the
// Sharder would load buckets into the informers of a controller that does
// not exist.
func TestAShardedNewThatFailsShouldLeaveNoHandlerOnTheSharder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := storeWithKeys(50)
		s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "ints", Identity: "a", Buckets: shardBuckets,
			LeaseDuration: bubbleLease, RenewDeadline: bubbleRenew, RetryPeriod: bubbleRetry})
		require.NoError(t, err)
		inf := must.Do(informer.New("ints", informer.Bucketed[string, int](memstore.WithBuckets(store, shardBucketOf), shardBucketOf),
			informer.WithLogger(quietLogger)))
		reg := prometheus.NewRegistry()
		_, err = reconcile.New("ints", &keyLog{}, reconcile.For(must.Do(informer.New("other", must.Do(memstore.New[string, int]())))),
			reconcile.WithMetrics(reg))
		require.NoError(t, err)
		_, err = reconcile.New("ints", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}), reconcile.For(inf), reconcile.WithShards(s), reconcile.WithMetrics(reg), quiet)
		require.ErrorContains(t, err, "already registered")

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		go func() { _ = inf.Run(ctx); done <- struct{}{} }()
		go func() { _ = s.Run(ctx); done <- struct{}{} }()
		for deadline := time.Now().Add(time.Minute); len(s.Status().Held) < shardBuckets; time.Sleep(bubbleRetry) {
			require.True(t, time.Now().Before(deadline), "the Sharder never held every bucket")
		}
		time.Sleep(5 * time.Second)
		assert.Zero(t, inf.Len(), "no bucket was loaded for the controller that New refused")
		cancel()
		<-done
		<-done
	})
}
