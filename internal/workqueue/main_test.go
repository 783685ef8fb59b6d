package workqueue_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/internal/queuetest"
	"github.com/converge-go/converge/internal/workqueue"
)

// The contracts that package queue forwards are tested there, through its
// public face; the tests here are of what only this package offers.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestQueue returns a queue on a fake clock, shut down when the test ends.
func newTestQueue(t *testing.T, opts ...workqueue.Option) (*workqueue.Queue[string], *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := workqueue.New[string](append([]workqueue.Option{workqueue.WithClock(clk)}, opts...)...)
	t.Cleanup(q.ShutDown)
	return q, clk
}

// get and drain are queuetest's, for this package's string-keyed queues.
var (
	get   = queuetest.Get[string]
	drain = queuetest.Drain[string]
)
