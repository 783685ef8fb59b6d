package reconcile

import (
	"context"
	"runtime"
	"testing"

	"github.com/converge-go/converge/internal/workqueue"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reconcile's own cost on the worker's path, with default options, is its
// context: one allocation of at most 64 bytes. Each reconcile of a million
// keys is an allocation of fresh memory, so its size is paid per key.
func TestAReconcileWithDefaultOptionsShouldCostOneAllocationOfAtMost64Bytes(t *testing.T) {
	var seen int
	rec := Func(func(ctx context.Context, key string) (Result, error) {
		seen++
		return Result{}, nil
	})
	c, err := New("alloc", rec, FromChannel("keys", make(chan string)))
	require.NoError(t, err)
	r := newRun(t.Context(), c)
	t.Cleanup(r.cancelWork)
	slot := &r.slots[0]
	var why workqueue.Reasons
	r.process(slot, "key", &why) // warm up: first-use allocations are not per reconcile

	const runs = 1000
	allocs := testing.AllocsPerRun(runs, func() { r.process(slot, "key", &why) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		r.process(slot, "key", &why)
	}
	runtime.ReadMemStats(&after)

	assert.Equal(t, 2+2*runs, seen)
	assert.LessOrEqual(t, allocs, 1.0, "allocations per reconcile")
	assert.LessOrEqual(t, float64(after.TotalAlloc-before.TotalAlloc)/runs, 64.0, "bytes per reconcile")
}
