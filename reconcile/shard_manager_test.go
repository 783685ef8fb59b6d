package reconcile_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

func newShardedController(t *testing.T) (*shard.Sharder, *informer.Informer[string, int], *reconcile.Controller[string]) {
	t.Helper()
	s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "t", Identity: "r1", Buckets: 4,
		LeaseDuration: bubbleLease, RenewDeadline: bubbleRenew, RetryPeriod: bubbleRetry})
	require.NoError(t, err)
	inf := must.Do(informer.New("items", storeWithKeys(10), informer.WithLogger(quietLogger)))
	c, err := reconcile.New("c", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.For(inf), reconcile.WithShards(s), quiet)
	require.NoError(t, err)
	return s, inf, c
}

// A sharded controller whose Sharder no Manager runs would hold no bucket
// and reconcile nothing: AddController refuses it unless the Manager runs
// that Sharder (ManagerOptions.Shards).
func TestAddControllerShouldRefuseAShardedControllerWhoseSharderTheManagerDoesNotRun(t *testing.T) {
	s, inf, c := newShardedController(t)
	other, err := shard.New(memlock.NewLocks(), shard.Config{Name: "t", Identity: "r1", Buckets: 4})
	require.NoError(t, err)
	for name, opts := range map[string]reconcile.ManagerOptions{
		"no Shards":       {Logger: quietLogger},
		"another Sharder": {Shards: other, Logger: quietLogger},
	} {
		m, err := reconcile.NewManager(opts)
		require.NoError(t, err)
		require.NoError(t, m.AddInformer(inf))
		err = m.AddController(c)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "ManagerOptions.Shards", name)
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	assert.NoError(t, m.AddController(c), "the Manager runs the controller's Sharder")
}

// A Manager runs its ManagerOptions.Shards; running the same Sharder a
// second time (AddFunc with its Run, as older docs showed) fails the
// Manager's Run with an error that says so, instead of sharding twice.
func TestRunningTheManagersSharderAgainShouldFailWithAClearError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, inf, c := newShardedController(t)
		m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: quietLogger})
		require.NoError(t, err)
		require.NoError(t, m.AddInformer(inf))
		require.NoError(t, m.AddController(c))
		require.NoError(t, m.AddFunc("shards", s.Run))
		err = m.Run(context.Background())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ManagerOptions.Shards")
	})
}
