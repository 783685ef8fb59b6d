package memstore

import (
	"context"
	"runtime/metrics"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlocksShouldKeepOrderAcrossBlockEdgesAndZeroWhatIsPopped(t *testing.T) {
	var s blocks[*int]
	n := 2*blockLen + 3
	vals := make([]int, n)
	for i := range n {
		vals[i] = i
		s.push(&vals[i])
	}
	require.Equal(t, n, s.len())
	for i := range n {
		require.Equal(t, i, **s.at(i))
	}
	got := 0
	for v := range s.all() {
		require.Equal(t, got, *v)
		got++
	}
	require.Equal(t, n, got)

	// Back across the second edge: the place popped is zeroed, so the
	// store's deleted values can be collected; one empty block is kept
	// as a spare, and more are given back.
	last := s.at(blockLen * 2)
	for s.len() > blockLen*2 {
		s.pop()
	}
	assert.Nil(t, *last)
	assert.Equal(t, 3, len(s.b))
	for s.len() > 1 {
		s.pop()
	}
	assert.Equal(t, 2, len(s.b))
	s.push(&vals[7])
	assert.Equal(t, 7, **s.at(1))
	assert.Equal(t, 0, **s.at(0))

	// Popping back onto a block's edge leaves that block empty: it is
	// the spare, and the one after it goes.
	for s.len() < 3*blockLen+1 {
		s.push(&vals[0])
	}
	require.Equal(t, 4, len(s.b))
	for s.len() > 2*blockLen {
		s.pop()
	}
	assert.Equal(t, 3, len(s.b), "two full blocks and one empty")
}

// A store in a controller's hot path must not make one write in thousands
// wait while it copies everything it holds: a slice grown by append does,
// at each doubling (about a millisecond at 100k changes).
func TestNoWriteShouldAllocateMoreThanABlockHoweverLargeTheStoreGrows(t *testing.T) {
	s, err := New[string, int]()
	require.NoError(t, err)
	ctx := context.Background()
	n := 40 * blockLen
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	// A write may allocate a block of the history and one of the items
	// (144 KB for these types) and a table of the key index, which Go's
	// maps grow a table at a time; and the runtime counts small objects a
	// span at a time, when it hands the span out. Together that stays
	// under 512 KB (measured), a megabyte with room to spare. Copying the
	// history or the items of this store whole costs several megabytes.
	blocksBytes := uint64(blockLen) * uint64(unsafe.Sizeof(change[string, int]{})+unsafe.Sizeof(item[string, int]{}))
	const limit uint64 = 1 << 20
	require.Less(t, blocksBytes, limit/4, "the limit leaves room for a block of each")
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var worst uint64
	var worstOp string
	note := func(op string, i int, before uint64) {
		if d := allocated() - before; d > worst {
			worst, worstOp = d, op+" "+keys[i]
		}
	}
	for i, k := range keys {
		before := allocated()
		s.Put(k, i)
		note("create", i, before)
	}
	for i, k := range keys {
		before := allocated()
		s.Put(k, -i)
		note("update", i, before)
	}
	for i, k := range keys {
		_, rev, _, err := s.Get(ctx, k)
		require.NoError(t, err)
		before := allocated()
		_, err = s.Delete(ctx, k, rev)
		note("delete", i, before)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, worst, limit, "the costliest write, %s, allocated %d bytes", worstOp, worst)
	assert.Zero(t, s.Len())
}
