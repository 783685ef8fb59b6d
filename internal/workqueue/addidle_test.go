package workqueue_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/workqueue"
)

func TestAddUnlessProcessingSkipsAKeyAWorkerHoldsAndAddsOtherwise(t *testing.T) {
	q := workqueue.New[string]()
	defer q.ShutDown()
	assert.True(t, q.AddUnlessProcessing("a"), "absent: added")
	assert.Equal(t, 1, q.Len())
	assert.True(t, q.AddUnlessProcessing("a"), "ready: merged")
	assert.Equal(t, 1, q.Len())

	k, _ := q.Get()
	require.Equal(t, "a", k)
	assert.False(t, q.AddUnlessProcessing("a"), "held by a worker")
	q.Done("a")
	assert.Zero(t, q.Len(), "not run again after Done")
	assert.True(t, q.Idle())

	q.AddAfter("b", 1<<40)
	assert.True(t, q.AddUnlessProcessing("b"), "waiting for a delay: ready now")
	assert.Equal(t, 1, q.Len())
}
