package informer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// digitBucket files "<d>/name" under bucket d.
func digitBucket(k string) int { return int(k[0] - '0') }

// runInformer runs inf until the test ends and waits for its cache.
func runInformer(t *testing.T, inf *informer.Informer[string, int]) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = inf.Run(ctx) })
	waitCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	require.NoError(t, inf.WaitForCache(waitCtx))
	return ctx
}

func TestABucketedInformerCachesOnlyTheBucketsItHolds(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	for _, k := range []string{"0/a", "1/a", "1/b", "2/a"} {
		store.Put(k, 1)
	}
	inf := must.Do(informer.New("ints", informer.Bucketed(memstore.WithBuckets(store, digitBucket), digitBucket)))
	var mu sync.Mutex
	var told []string
	_, err := inf.AddHandler(informer.HandlerFuncs[string, int]{AddFunc: func(k string, _ int, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, k)
	}})
	require.NoError(t, err)
	ctx := runInformer(t, inf)
	assert.Empty(t, keysOf(inf.List()), "no bucket held yet")

	require.NoError(t, inf.AcquireBucket(ctx, 1))
	assert.Equal(t, []string{"1/a", "1/b"}, keysOf(inf.List()), "the bucket's keys are cached when AcquireBucket returns")
	store.Put("1/c", 2)
	rev := store.Put("2/b", 2)
	require.NoError(t, inf.WaitForRevision(ctx, rev), "another bucket's change still moves the revision on")
	v, ok := inf.Get("1/c")
	assert.True(t, ok)
	assert.Equal(t, 2, v)
	assert.Equal(t, []string{"1/a", "1/b", "1/c"}, keysOf(inf.List()))
	require.NoError(t, inf.WaitForSync(ctx))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(told) > 0
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	assert.Equal(t, []string{"1/c"}, told, "handlers are told of the held bucket's changes, not of its loaded keys")
	mu.Unlock()

	require.NoError(t, inf.AcquireBucket(ctx, 1))
	inf.ReleaseBucket(1)
	assert.Len(t, keysOf(inf.List()), 3, "a bucket acquired twice stays until released twice")
	inf.ReleaseBucket(1)
	assert.Empty(t, keysOf(inf.List()))
	rev = store.Put("1/d", 3)
	require.NoError(t, inf.WaitForRevision(ctx, rev))
	assert.Empty(t, keysOf(inf.List()), "a released bucket's changes are not followed")
}

// racingSource changes a bucket right after ListBuckets took its snapshot,
// before the load has stored it.
type racingSource struct {
	*memstore.Buckets[string, int]
	once sync.Once
	rev  chan informer.Revision
}

func (s *racingSource) ListBuckets(ctx context.Context, buckets []int) ([]informer.Entry[string, int], informer.Revision, error) {
	entries, rev, err := s.Buckets.ListBuckets(ctx, buckets)
	if len(buckets) == 1 {
		s.once.Do(func() {
			s.Put("1/a", 2)
			r, _ := s.Delete(ctx, "1/b", 0)
			s.Put("1/c", 3)
			s.rev <- r + 1
		})
	}
	return entries, rev, err
}

func TestABucketedInformerKeepsTheChangesMadeWhileABucketLoads(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("1/a", 1)
	store.Put("1/b", 1)
	src := &racingSource{Buckets: memstore.WithBuckets(store, digitBucket), rev: make(chan informer.Revision, 1)}
	inf := must.Do(informer.New("ints", informer.Bucketed[string, int](src, digitBucket)))
	ctx := runInformer(t, inf)

	require.NoError(t, inf.AcquireBucket(ctx, 1))
	require.NoError(t, inf.WaitForRevision(ctx, <-src.rev))
	assert.Equal(t, []string{"1/a", "1/c"}, keysOf(inf.List()))
	v, _ := inf.Get("1/a")
	assert.Equal(t, 2, v, "the change after the snapshot wins")
}

func TestAnInformerThatIsNotBucketedCachesEveryBucket(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("1/a", 1)
	store.Put("2/a", 1)
	inf := must.Do(informer.New("ints", store))
	ctx := runInformer(t, inf)
	require.NoError(t, inf.AcquireBucket(ctx, 1))
	inf.ReleaseBucket(1)
	assert.Equal(t, []string{"1/a", "2/a"}, keysOf(inf.List()))
}

func TestABucketedInformerOverTheMemoryStoreCachesOnlyTheBucketsItHolds(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	of := func(k string) int { return int(k[len(k)-1]-'0') % 4 }
	sourcetest.RunBucketed(t, sourcetest.BucketSuite[int]{Source: memstore.WithBuckets(store, of), Store: store,
		BucketOf: of, Buckets: 4, Value: func(i int) int { return i }})
}
