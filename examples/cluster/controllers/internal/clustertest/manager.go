package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/reconcile"
)

// RunManager runs the controllers that adds add in one reconcile.Manager,
// as the control plane's up does: over memory stores, informers made by
// api.NewInformers, api.FastTimings and the real clock. It returns the
// stores and a context for the test's waits, which ends with the test or
// after waitAtMost; the Manager stops, and must have returned no error,
// when the test ends.
func RunManager(t testing.TB, adds ...func(*reconcile.Manager, *api.Cluster) error) (api.Stores, context.Context) {
	t.Helper()
	st, err := api.NewMemoryStores()
	require.NoError(t, err)
	infs, err := api.NewInformers(st)
	require.NoError(t, err)
	c := &api.Cluster{Stores: st, Informers: infs, Timings: api.FastTimings(), Clock: clock.RealClock{}}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{})
	require.NoError(t, err)
	for _, add := range adds {
		require.NoError(t, add(m, c))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	wait, stop := context.WithTimeout(ctx, waitAtMost)
	t.Cleanup(func() {
		stop()
		cancel()
		require.NoError(t, <-done)
	})
	return st, wait
}

// waitAtMost bounds a RunManager test's waits, so that a controller that
// never acts fails the test instead of hanging it.
const waitAtMost = 30 * time.Second
