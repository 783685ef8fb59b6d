package reconciletest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer/memory"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A reconciler that writes back to the store (a status, say) causes more
// reconciles; Settle waits for all of them, not just the first.
func TestSettleWaitsForReconcilesThatWriteToTheStore(t *testing.T) {
	h := reconciletest.New(t)
	store := memory.New[string, int]()
	var calls atomic.Int32
	rec := reconcile.Func[string](func(_ context.Context, key string) (reconcile.Result, error) {
		calls.Add(1)
		if v, _, _ := store.Get(key); v < 10 {
			store.Put(key, v+1) // one step at a time, each a new change
		}
		return reconcile.Result{}, nil
	})
	inf := reconciletest.Informer(h, "counters", store)
	reconciletest.Controller(h, "counters", rec, reconcile.For(inf))
	store.Put("a", 0)
	h.Settle()
	v, _, _ := store.Get("a")
	assert.Equal(t, 10, v)
	assert.Equal(t, int32(11), calls.Load())
}

func TestStepFiresWhatIsDueAndSettles(t *testing.T) {
	h := reconciletest.New(t)
	store := memory.New[string, int]()
	store.Put("a", 0)
	var calls atomic.Int32
	rec := reconcile.Func[string](func(context.Context, string) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	})
	inf := reconciletest.Informer(h, "a", store)
	reconciletest.Controller(h, "a", rec, reconcile.For(inf))
	h.Settle()
	assert.Equal(t, int32(1), calls.Load())
	h.Step(30 * time.Second)
	assert.Equal(t, int32(1), calls.Load())
	h.Step(30 * time.Second)
	assert.Equal(t, int32(2), calls.Load())
}
