package etcdstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// These tests compact the shared etcd, which expires every older revision,
// so they do not run in parallel (Go starts the parallel tests only after
// every sequential one has finished).

func TestWatchFromACompactedRevisionShouldReturnErrRevisionExpired(t *testing.T) {
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	c := &rawWriter{cli, prefix}
	src := must.Do(etcdstore.New[item](cli, prefix))

	old, err := c.Put(ctx, "a", item{N: 1})
	require.NoError(t, err)
	_, err = c.Put(ctx, "a", item{N: 2})
	require.NoError(t, err)
	compactAt, err := c.Put(ctx, "a", item{N: 3})
	require.NoError(t, err)
	_, err = cli.Compact(ctx, int64(compactAt))
	require.NoError(t, err)

	err = src.Watch(ctx, old, func(informer.Event[string, item]) error { return nil })
	require.ErrorIs(t, err, informer.ErrRevisionExpired)

	// Watching from exactly the compaction revision still works.
	r := startWatch(t, src, compactAt-1)
	require.Eventually(t, func() bool { return r.lastRevision() >= compactAt }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.stop())
	first := r.snapshot()[0]
	assert.Equal(t, informer.Event[string, item]{Type: informer.Put, Key: "a", Value: item{N: 3}, Revision: compactAt}, first)
}

func TestListAndWatchShouldReconstructThePrefixUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 40*time.Second)
	prefix := uniquePrefix(t)
	c := &rawWriter{cli, prefix}
	src := must.Do(etcdstore.New[item](cli, prefix))
	// A sibling prefix that shares the first bytes must stay invisible.
	other := &rawWriter{cli, prefix[:len(prefix)-1] + "-other/"}

	const writers, ops, keys = 4, 150, 40
	var wg sync.WaitGroup
	listed := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range ops {
				if i == ops/3 && w == 0 {
					close(listed) // let the lister start mid-stream
				}
				key := fmt.Sprintf("k%02d", rng.IntN(keys))
				var err error
				switch rng.IntN(4) {
				case 0:
					_, _, err = c.Delete(ctx, key)
				case 1:
					_, err = other.Put(ctx, key, item{N: i})
				default:
					_, err = c.Put(ctx, key, item{N: w*ops + i, S: key})
				}
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}

	<-listed
	entries, rev, err := src.List(ctx)
	require.NoError(t, err)
	r := startWatch(t, src, rev)
	wg.Wait()

	final, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	want := make(map[string]item)
	for _, kv := range final.Kvs {
		v, err := informer.JSON[item]{}.Unmarshal(kv.Value)
		require.NoError(t, err)
		want[string(kv.Key[len(prefix):])] = v
	}
	// Wait for the last change under the prefix (or a bookmark past it).
	var lastChange int64
	for _, kv := range final.Kvs {
		lastChange = max(lastChange, kv.ModRevision)
	}
	require.Eventually(t, func() bool {
		return r.lastRevision() >= informer.Revision(lastChange) && assert.ObjectsAreEqual(want, apply(entries, r.snapshot()))
	}, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, r.stop())

	events := r.snapshot()
	for i, e := range events {
		assert.Greater(t, e.Revision, rev, "event %d is not after the list", i)
		if i > 0 {
			assert.GreaterOrEqual(t, e.Revision, events[i-1].Revision, "event %d goes back", i)
		}
		if e.Type == informer.Delete {
			assert.Zero(t, e.Value, "deletes carry no value")
		}
	}
	assert.Equal(t, want, apply(entries, events))
}

func TestProgressNotificationShouldBecomeABookmark(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	src := must.Do(etcdstore.New[item](cli, prefix))

	_, rev, err := src.List(ctx)
	require.NoError(t, err)
	r := startWatch(t, src, rev)
	// A write elsewhere moves the store's revision past the list's.
	resp, err := cli.Put(ctx, prefix[:len(prefix)-1]+"-elsewhere", "x")
	require.NoError(t, err)
	elsewhere := informer.Revision(resp.Header.Revision)

	// The test servers notify progress every second; asking speeds it up and
	// makes the test work against any etcd. The watch's stream is the one
	// with the require-leader metadata.
	require.Eventually(t, func() bool {
		_ = cli.RequestProgress(clientv3.WithRequireLeader(ctx))
		return r.lastRevision() >= elsewhere
	}, 15*time.Second, 100*time.Millisecond)
	require.NoError(t, r.stop())

	var prev informer.Revision
	for _, e := range r.snapshot() {
		assert.Equal(t, informer.Bookmark, e.Type)
		assert.Greater(t, e.Revision, prev, "bookmarks only move forward")
		prev = e.Revision
	}
}

func TestWatchAfterARevisionTheStoreHasNotReachedShouldExpire(t *testing.T) {
	// As after etcd was restored from a snapshot without a revision bump:
	// the informer's revision is from a history the store no longer has.
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	src := must.Do(etcdstore.New[item](cli, uniquePrefix(t)))
	_, rev, err := src.List(ctx)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = src.Watch(wctx, rev+1000, func(informer.Event[string, item]) error { return nil })
	require.ErrorIs(t, err, informer.ErrRevisionExpired, "not a watch that waits for the store to catch up")
	assert.Contains(t, err.Error(), "went back")
	assert.NoError(t, wctx.Err(), "at once")
}

func TestWatchShouldEmitDeletesWithoutValueAtTheirRevision(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	src := must.Do(etcdstore.New[item](cli, prefix))
	c := &rawWriter{cli, prefix}

	put, err := c.Put(ctx, "a", item{N: 1})
	require.NoError(t, err)
	r := startWatch(t, src, put-1)
	_, _, err = c.Delete(ctx, "a")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.lastRevision() > put }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.stop())

	events := r.snapshot()
	require.GreaterOrEqual(t, len(events), 2)
	assert.Equal(t, informer.Event[string, item]{Type: informer.Put, Key: "a", Value: item{N: 1}, Revision: put}, events[0])
	assert.Equal(t, informer.Delete, events[1].Type)
	assert.Equal(t, "a", events[1].Key)
	assert.Zero(t, events[1].Value)
	assert.Greater(t, events[1].Revision, put)
}

func TestWatchShouldReturnTheEmitError(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	src := must.Do(etcdstore.New[item](cli, prefix))
	put, err := (&rawWriter{cli, prefix}).Put(ctx, "a", item{N: 1})
	require.NoError(t, err)

	stop := errors.New("stop")
	err = src.Watch(ctx, put-1, func(informer.Event[string, item]) error { return stop })
	assert.ErrorIs(t, err, stop)
}

func TestWatchShouldReturnTheContextErrorWhenCanceled(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	_, rev, err := must.Do(etcdstore.New[item](cli, uniquePrefix(t))).List(ctxFor(t, 10*time.Second))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = must.Do(etcdstore.New[item](cli, uniquePrefix(t))).Watch(ctx, rev, func(informer.Event[string, item]) error { return nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// lockedWriter serialises writes to w, shared with a reader holding mu.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
