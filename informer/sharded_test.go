package informer_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

// A list of thousands of keys is cached in several maps (the cache sizes
// itself for it); every contract holds as for a small one: duplicates
// skipped by revision, a late handler's replay, a relist's difference, and
// the index.
func TestAnInformerFilledFromALargeListShouldFollowItsChangesAsASmallOneDoes(t *testing.T) {
	const n = 5000
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity)))
	early := newRecorder()
	_, err := inf.AddHandler(early)
	require.NoError(t, err)
	want := map[string]int{}
	for i := range n {
		want["k"+strconv.Itoa(i)] = i
	}
	src.list(100, want)
	start(t, inf)
	w := src.nextWatch(t)
	require.NoError(t, inf.WaitForSync(context.Background()))
	assert.Equal(t, want, early.View())
	assert.Equal(t, n, inf.Len())

	w.put(t, "k5", 1, 101)
	w.put(t, "k5", 3, 101) // a duplicate: skipped by the key's revision
	w.del(t, "k7", 102)
	w.put(t, "new", 6, 103)
	want["k5"], want["new"] = 1, 6
	delete(want, "k7")
	assert.Equal(t, want, cacheMap(inf))
	v, ok := inf.Get("k5")
	assert.True(t, ok)
	assert.Equal(t, 1, v)
	assert.Equal(t, uint64(3), inf.Stats().Events)
	assert.Zero(t, inf.Stats().Violations)
	// Not by its length: the delete and the add leave it unchanged.
	assert.Eventually(t, func() bool { return assertMapEqual(want, early.View()) }, wait, time.Millisecond,
		"the early handler follows the changes")

	late := newRecorder()
	reg, err := inf.AddHandler(late)
	require.NoError(t, err)
	require.Eventually(t, reg.HasSynced, wait, time.Millisecond)
	assert.Equal(t, want, late.View(), "the replay gives every cached key")
	assert.Len(t, late.Calls(), len(want), "once")

	relisted := map[string]int{}
	for i := range n / 2 {
		relisted["k"+strconv.Itoa(i)] = i + 1
	}
	src.list(200, relisted)
	w.end <- informer.ErrRevisionExpired
	src.nextWatch(t)
	assert.Equal(t, relisted, cacheMap(inf))
	for _, h := range []*recorder{early, late} {
		require.Eventually(t, func() bool { return len(h.View()) == len(relisted) }, wait, time.Millisecond)
		assert.Equal(t, relisted, h.View())
		assert.Empty(t, h.Violations())
	}
	// relisted's values are i+1: "k0" (1) is odd, and so on.
	odd := keysOf(inf.ByIndex("parity", "odd"))
	assert.Len(t, odd, n/4)
	for _, k := range odd {
		assert.Equal(t, 1, relisted[k]%2, k)
	}
}
