package informer

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShardsForSplitsAListIntoFewEnoughTablesAndNeverAboveFourFifthsFull(t *testing.T) {
	for _, n := range []int{0, 1, 819, 820, 5000, 10_000, 100_000, 300_000, 1_000_000, 10_000_000} {
		count, hint := shardsFor(n)
		require.GreaterOrEqual(t, count, 1, "n=%d", n)
		require.GreaterOrEqual(t, count*hint, n, "n=%d: the shards' hints cover every entry", n)
		if count == 1 {
			assert.Equal(t, n, hint, "n=%d: one map, sized as make would be", n)
			continue
		}
		// make(map, hint) gives a power of two of tables: the fewest
		// that stay at or below 7/8 full with hint entries.
		perShard := 1
		for perShard*tableSlots*7/8 < hint {
			perShard *= 2
		}
		need := (n + tableFill - 1) / tableFill
		assert.GreaterOrEqual(t, count*perShard, need, "n=%d", n)
		assert.LessOrEqual(t, count*perShard, need+need/minShards+1, "n=%d: at most 1/16 more tables than needed", n)
		assert.LessOrEqual(t, hint, perShard*tableFill, "n=%d: a shard's tables start at most 4/5 full", n)
	}
	count, _ := shardsFor(1_000_000)
	assert.Equal(t, 20, count, "1M entries: 20 shards of 64 tables, 1,280 in all")
}

// The bound is what the sizing is for: 40,960 B of groups per table of
// 1024 slots (a string key, a pointer and a revision per slot), at 4/5
// full, is 50 B an entry, and a cache that lets make size its one map
// takes 65.5 B at 10k entries and 69.9 B at 300k (and 83.9 B at 1M).
// If a Go release changes its maps' layout this may fail: look again at
// shardsFor's constants.
func TestACacheFilledFromAListHoldsItInAtMost56BytesAnEntry(t *testing.T) {
	for _, n := range []int{10_000, 300_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("namespace-%d/object-%06d", i%100, i)
		}
		v := new(int)
		before := liveHeap()
		c := newCache[string, *int]()
		c.grow(n)
		for i, k := range keys {
			_, _, err := c.set(k, v, Revision(i+1))
			require.NoError(t, err)
		}
		perEntry := float64(liveHeap()-before) / float64(n)
		runtime.KeepAlive(c)
		runtime.KeepAlive(keys) // or the slice is freed, and counted off
		assert.LessOrEqual(t, perEntry, 56.0, "n=%d", n)
		t.Logf("n=%d: %.1f B an entry", n, perEntry)
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// A cache sized for a list of several shards answers every read as a plain
// map with the same writes would, through sets, removes, revision bumps
// and removals while it is ranged over, and so does its index.
func TestAShardedCacheAgreesWithAPlainMapThroughEveryKindOfChange(t *testing.T) {
	const n = 6000
	rng := rand.New(rand.NewPCG(1, 2))
	c := newCache[string, int]()
	require.NoError(t, c.addIndex("parity", func(_ string, v int) []string { return []string{strconv.Itoa(v % 2)} }))
	c.grow(n)
	require.Greater(t, len(c.items.shards), 1, "the test must cover more than one shard")
	model := map[string]item[int]{}
	key := func() string { return "k" + strconv.Itoa(rng.IntN(2*n)) }
	for step := range 5 * n {
		rev := Revision(step + 1)
		switch k := key(); rng.IntN(10) {
		case 0, 1, 2, 3, 4, 5:
			v := rng.IntN(1000)
			old, existed, err := c.set(k, v, rev)
			require.NoError(t, err)
			prev, ok := model[k]
			assert.Equal(t, ok, existed, k)
			assert.Equal(t, prev.value, old, k)
			model[k] = item[int]{value: v, rev: rev}
		case 6, 7, 8:
			last, existed, err := c.remove(k)
			require.NoError(t, err)
			prev, ok := model[k]
			assert.Equal(t, ok, existed, k)
			assert.Equal(t, prev.value, last, k)
			delete(model, k)
		default:
			c.setRev(k, rev)
			if it, ok := model[k]; ok {
				it.rev = rev
				model[k] = it
			}
		}
	}
	// Remove every key of one parity while ranging, as relist and drop
	// do.
	for k, it := range c.all() {
		if it.value%2 == 1 {
			_, _, err := c.remove(k)
			require.NoError(t, err)
			delete(model, k)
		}
	}

	require.Equal(t, len(model), c.len())
	got := map[string]item[int]{}
	for k, it := range c.all() {
		got[k] = it
		cached, ok := c.get(k)
		require.True(t, ok, k)
		require.Equal(t, it, cached, k)
	}
	assert.Equal(t, model, got)
	assert.Len(t, c.entries(), len(model))
	assert.Empty(t, c.byIndex("parity", "1"))
	var evens []string
	for _, e := range c.byIndex("parity", "0") {
		evens = append(evens, e.Key)
	}
	slices.Sort(evens)
	want := make([]string, 0, len(model))
	for k := range model {
		want = append(want, k)
	}
	slices.Sort(want)
	assert.Equal(t, want, evens)
}
