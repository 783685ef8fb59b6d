package reconcile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// A sharded reconcile whose bucket was lost returns what its cancelled
// context made it return: that error is no failure, but it is logged at
// debug level and counted.
func TestAnErrorFromAReconcileWhoseBucketWasLostShouldBeLoggedAtDebugAndCounted(t *testing.T) {
	var logs bytes.Buffer
	c, err := New("c", Func(func(context.Context, string) (Result, error) { return Result{}, nil }),
		For(must.Do(informer.New("ints", must.Do(memstore.New[string, int]())))), WithMetrics(prometheus.NewRegistry()),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	c.shards = &sharding[string]{} // sharded, as WithShards makes it
	ctx, cancel := context.WithCancelCause(context.Background())
	r := newRun(ctx, c)
	defer r.cancelWork()
	cancel(ErrBucketLost)

	label := r.settle(&reconcileInfo[string]{Context: ctx, c: c, key: "a", id: 1}, "a", Result{}, errors.New("interrupted"), false)
	assert.Equal(t, labelRequeue, label)
	assert.Contains(t, logs.String(), `level=DEBUG msg="reconcile cancelled because its shard bucket was lost; its error is not a failure"`)
	assert.Contains(t, logs.String(), `error=interrupted`)
	assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.cancelled.WithLabelValues(cancelBucketLost)))
	assert.Equal(t, 0.0, testutil.ToFloat64(c.metrics.errors))
	_, failing := c.Status("a")
	assert.False(t, failing)
}
