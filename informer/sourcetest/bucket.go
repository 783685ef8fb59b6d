package sourcetest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// BucketSuite describes a BucketSource for RunBucketed: Source, written
// through Store (the same keys), files key k under BucketOf(k), one of
// Buckets buckets; Value(i) is the i-th value to write.
type BucketSuite[V any] struct {
	Source   informer.BucketSource[string, V]
	Store    informer.ReadWriter[string, V]
	BucketOf func(string) int
	Buckets  int
	Value    func(i int) V
}

// RunBucketed checks an informer over informer.Bucketed(s.Source): it
// caches nothing until a bucket is acquired, exactly the acquired buckets'
// keys once AcquireBucket returns, follows their changes and not the
// others' (while its revision still moves on past them), and drops a
// released bucket's keys. Store must start empty of keys "k0".."k63".
func RunBucketed[V any](t *testing.T, s BucketSuite[V]) {
	t.Helper()
	require.GreaterOrEqual(t, s.Buckets, 3, "RunBucketed needs at least 3 buckets")
	byBucket := map[int][]string{}
	for i := range 64 {
		k := "k" + strconv.Itoa(i)
		_, err := s.Store.Create(t.Context(), k, s.Value(i))
		require.NoError(t, err)
		byBucket[s.BucketOf(k)] = append(byBucket[s.BucketOf(k)], k)
	}
	// Two buckets with keys, and a third.
	var full []int
	for b := range s.Buckets {
		if len(byBucket[b]) > 0 {
			full = append(full, b)
		}
	}
	require.GreaterOrEqual(t, len(full), 3, "64 keys fill fewer than 3 buckets")
	held1, held2, other := full[0], full[1], full[2]

	inf, err := informer.New("bucketed", informer.Bucketed(s.Source, s.BucketOf))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = inf.Run(ctx) })
	wctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	require.NoError(t, inf.WaitForCache(wctx))
	assert.Zero(t, inf.Len(), "no bucket held yet")

	require.NoError(t, inf.AcquireBucket(wctx, held1))
	require.NoError(t, inf.AcquireBucket(wctx, held2))
	want := slices.Sorted(slices.Values(append(slices.Clone(byBucket[held1]), byBucket[held2]...)))
	assert.Equal(t, want, sortedKeys(inf.List()), "the acquired buckets' keys, when AcquireBucket returns")

	bump := func(k string) informer.Revision {
		_, rev, _, err := s.Store.Get(wctx, k)
		require.NoError(t, err)
		rev, err = s.Store.Update(wctx, k, s.Value(-1), rev)
		require.NoError(t, err)
		return rev
	}
	bump(byBucket[held1][0])
	require.NoError(t, inf.WaitForRevision(wctx, bump(byBucket[other][0])), "another bucket's change moves the revision on")
	v, _ := inf.Get(byBucket[held1][0])
	assert.Equal(t, s.Value(-1), v, "a held bucket's change is followed")
	_, ok := inf.Get(byBucket[other][0])
	assert.False(t, ok, "another bucket's change is not cached")

	inf.ReleaseBucket(held1)
	assert.Equal(t, slices.Sorted(slices.Values(byBucket[held2])), sortedKeys(inf.List()), "a released bucket's keys are dropped")
}

func sortedKeys[V any](entries []informer.Entry[string, V]) []string {
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return keys
}
