package reconciletest_test

import (
	"context"
	"errors"
	"log"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// App is desired state (Replicas) and the status a controller writes back
// (Running).
type App struct {
	Replicas int
	Running  int
}

// A controller's test: the harness runs the informer and the controller on
// a fake clock, Settle waits until every write has been reconciled, and
// Step moves the clock to fire a retry, so the test never sleeps. The
// test below fails the first reconcile, sees the failure in Status, and
// sees the retry succeed. In a test file of its own it would be
// TestAppShouldRunItsReplicasAfterARetry; this package's tests run it.
func testAppShouldRunItsReplicasAfterARetry(t *testing.T) {
	h := reconciletest.New(t)
	store, err := memstore.New[string, App]()
	if err != nil {
		log.Fatal(err)
	}
	apps := reconciletest.Informer(h, "apps", store)
	var down atomic.Bool // the world the controller acts on is unreachable
	c := reconciletest.Controller(h, "apps", reconcile.Func(func(ctx context.Context, name string) (reconcile.Result, error) {
		app, ok := apps.Get(name)
		if !ok || app.Running == app.Replicas {
			return reconcile.Result{}, nil
		}
		if down.Load() {
			return reconcile.Result{}, errors.New("unreachable")
		}
		_, _, err := informer.Update(ctx, store, name, func(a *App) error { a.Running = a.Replicas; return nil })
		return reconcile.Result{}, err
	}), reconcile.For(apps))

	down.Store(true)
	store.Put("web", App{Replicas: 3})
	h.Settle()
	st, failing := c.Status("web")
	require.True(t, failing)
	assert.Equal(t, 1, st.Attempts)

	down.Store(false)
	h.Step(time.Minute) // past the backoff: the retry runs, and settles
	app, _, _, _ := store.Get(t.Context(), "web")
	assert.Equal(t, 3, app.Running)
	_, failing = c.Status("web")
	assert.False(t, failing)
}

func Example() {
	_ = testAppShouldRunItsReplicasAfterARetry
}
