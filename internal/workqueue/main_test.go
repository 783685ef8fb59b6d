package workqueue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

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

// get is Get that fails the test instead of blocking forever.
func get(t *testing.T, q *workqueue.Queue[string]) string {
	t.Helper()
	type got struct {
		key      string
		shutdown bool
	}
	ch := make(chan got, 1)
	go func() {
		k, s := q.Get()
		ch <- got{k, s}
	}()
	select {
	case g := <-ch:
		require.False(t, g.shutdown, "Get reported shutdown")
		return g.key
	case <-time.After(5 * time.Second):
		q.ShutDown() // unblock the goroutine
		require.FailNow(t, "Get blocked with nothing ready")
		return ""
	}
}

// drain takes every ready key, marking each done, in the order Get gives.
func drain(t *testing.T, q *workqueue.Queue[string]) []string {
	t.Helper()
	var keys []string
	for q.Len() > 0 {
		k := get(t, q)
		keys = append(keys, k)
		q.Done(k)
	}
	return keys
}
