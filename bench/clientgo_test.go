package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

// converge's queue and limiters must drop into client-go and
// controller-runtime programs unchanged. These checks live in the bench
// module because it depends on client-go already: the library's module must
// not, not even for a test, or its go.mod would require client-go of every
// program that uses converge. They fail to compile if the
// method sets ever drift apart.
var (
	_ workqueue.TypedRateLimitingInterface[string] = (*queue.Queue[string])(nil)

	_ workqueue.TypedRateLimiter[string] = backoff.NewPerKey[string](backoff.Exponential{})
	_ workqueue.TypedRateLimiter[string] = backoff.NewBucket[string](10, 100, nil)
	_ workqueue.TypedRateLimiter[string] = backoff.Max[string]()
	_ workqueue.TypedRateLimiter[string] = backoff.DefaultController[string](nil)

	// And the other way: client-go's limiters are converge Limiters.
	_ backoff.Limiter[string] = workqueue.DefaultTypedControllerRateLimiter[string]()
)

// A converge queue used through client-go's interface, with a client-go
// rate limiter, behaves as a client-go queue: rate-limited adds count
// requeues, Forget resets them, and a shut-down queue reports it.
func TestConvergeQueueWorksAsAClientGoRateLimitingQueue(t *testing.T) {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	var q workqueue.TypedRateLimitingInterface[string] = must.Do(queue.New[string](queue.WithRateLimiter[string](limiter)))
	defer q.ShutDown()

	q.AddRateLimited("a")
	assert.Equal(t, 1, q.NumRequeues("a"))
	key, shutdown := q.Get() // due after 1 ms
	require.False(t, shutdown)
	assert.Equal(t, "a", key)
	q.Done(key)
	q.Forget(key)
	assert.Equal(t, 0, q.NumRequeues("a"))

	q.ShutDown()
	_, shutdown = q.Get()
	assert.True(t, shutdown)
}

// client-go's BucketRateLimiter with burst 0 grants no token at all: Reserve
// fails and When returns rate.InfDuration, which a converge queue takes as
// "never" (the key waits until a plain Add), not as "now".
func TestAddRateLimitedWithClientGosZeroBurstBucketShouldParkTheKey(t *testing.T) {
	limiter := &workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(10, 0)}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := must.Do(queue.New[string](queue.WithRateLimiter[string](limiter), queue.WithClock(clk)))
	defer q.ShutDown()
	clk.Step(time.Minute)
	q.AddRateLimited("a")
	assert.Equal(t, 0, q.Len())
	clk.Step(time.Hour)
	assert.Equal(t, 0, q.Len())
	q.Add("a")
	assert.Equal(t, 1, q.Len(), "a plain Add makes it ready")
}
