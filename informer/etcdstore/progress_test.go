package etcdstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// countingWatcher counts the progress requests made through a client.
type countingWatcher struct {
	clientv3.Watcher
	requests atomic.Int64
}

func (w *countingWatcher) RequestProgress(ctx context.Context) error {
	w.requests.Add(1)
	return w.Watcher.RequestProgress(ctx)
}

// countRequests makes cli count its progress requests.
func countRequests(cli *clientv3.Client) *countingWatcher {
	w := &countingWatcher{Watcher: cli.Watcher}
	cli.Watcher = w
	return w
}

func TestWatchOfAQuietPrefixShouldAskForProgressEachIntervalOnItsClockAndReachTheHead(t *testing.T) {
	// The watch's clock is fake: it asks only when the test steps it by
	// the interval, and each answer is a bookmark at etcd's head.
	t.Parallel()
	const interval = time.Minute
	cli := etcdClient(t)
	requests := countRequests(cli)
	clk := clocktesting.NewFakeClock(time.Now())
	ctx := ctxFor(t, 30*time.Second)
	prefix := uniquePrefix(t)
	src := must.Do(etcdstore.New[item](cli, prefix,
		etcdstore.WithProgressInterval[item](interval), etcdstore.WithClock[item](clk)))
	_, rev, err := src.List(ctx)
	require.NoError(t, err)
	r := startWatch(t, src, rev)

	for round := range 5 {
		resp, err := cli.Put(ctx, prefix[:len(prefix)-1]+"-elsewhere", "x")
		require.NoError(t, err)
		head := informer.Revision(resp.Header.Revision)
		before := requests.requests.Load()
		require.Eventually(t, func() bool {
			clk.Step(interval)
			return requests.requests.Load() > before && r.lastRevision() >= head
		}, 10*time.Second, 5*time.Millisecond,
			"round %d: the watch of the quiet prefix asks and reaches the head %d", round, head)
	}
	require.NoError(t, r.stop())
	for _, e := range r.snapshot() {
		assert.Equal(t, informer.Bookmark, e.Type)
	}
}

func TestWatchWithEventsFlowingShouldNotRequestProgress(t *testing.T) {
	t.Parallel()
	const interval = time.Minute
	cli := etcdClient(t)
	requests := countRequests(cli)
	clk := clocktesting.NewFakeClock(time.Now())
	ctx := ctxFor(t, 30*time.Second)
	prefix := uniquePrefix(t)
	src := must.Do(etcdstore.New[item](cli, prefix,
		etcdstore.WithProgressInterval[item](interval), etcdstore.WithClock[item](clk)))
	w := &rawWriter{cli, prefix}
	_, rev, err := src.List(ctx)
	require.NoError(t, err)
	r := startWatch(t, src, rev)

	// Each write follows the previous one's event by just under an
	// interval, for several intervals: the watch restarted its timer on
	// the event before emitting it.
	for range 5 {
		put, err := w.Put(ctx, "a", item{N: 1})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return r.lastRevision() >= put }, 10*time.Second, time.Millisecond)
		clk.Step(interval - time.Millisecond)
	}
	assert.Zero(t, requests.requests.Load(), "no progress request while events flow")

	// Once the prefix is quiet for an interval, the watch asks.
	require.Eventually(t, func() bool {
		clk.Step(interval)
		return requests.requests.Load() > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.stop())
}

func TestWatchWithProgressIntervalShouldEndAtOnceWhenCanceled(t *testing.T) {
	// The package's goleak check fails if the timer or a request outlives
	// the watch.
	t.Parallel()
	cli := etcdClient(t)
	requests := countRequests(cli)
	ctx := ctxFor(t, 20*time.Second)
	src := must.Do(etcdstore.New[item](cli, uniquePrefix(t), etcdstore.WithProgressInterval[item](time.Millisecond)))
	_, rev, err := src.List(ctx)
	require.NoError(t, err)
	r := startWatch(t, src, rev)
	require.Eventually(t, func() bool { return requests.requests.Load() > 3 }, 10*time.Second, time.Millisecond)
	require.NoError(t, r.stop(), "ends with context.Canceled")
}

func TestWatchWithoutProgressIntervalShouldNotRequestProgress(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		cli := etcdClient(t)
		requests := countRequests(cli)
		ctx := ctxFor(t, 20*time.Second)
		prefix := uniquePrefix(t)
		src := must.Do(etcdstore.New[item](cli, prefix, etcdstore.WithProgressInterval[item](d)))
		_, rev, err := src.List(ctx)
		require.NoError(t, err)
		r := startWatch(t, src, rev)
		// The server's own notification (every second on the test
		// servers) still makes a bookmark; the watch asks for none.
		resp, err := cli.Put(ctx, prefix[:len(prefix)-1]+"-elsewhere", "x")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return r.lastRevision() >= informer.Revision(resp.Header.Revision) },
			10*time.Second, 10*time.Millisecond)
		require.NoError(t, r.stop())
		assert.Zero(t, requests.requests.Load(), "interval %v", d)
	}
}
