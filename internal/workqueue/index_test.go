package workqueue

import (
	"hash/maphash"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndexShouldAgreeWithAMapUnderRandomInsertsAndDeletes drives the index
// through growth, shrinking and long probe runs. Tags are forced into a few
// values so that backward-shift deletion is exercised on every delete.
var testSeed = maphash.MakeSeed()

func hashTag(k int) uint32 { return uint32(maphash.Comparable(testSeed, k)) }

func TestIndexShouldAgreeWithAMapUnderRandomInsertsAndDeletes(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, seed))
		x := newIndex[int]()
		var s slab[int]
		s.free = none
		want := map[int]int32{}
		tagOf := func(k int) uint32 {
			if seed%2 == 0 {
				return uint32(k%97) * 0x9e3779b9 // few tags: long probe runs
			}
			return hashTag(k)
		}
		for step := 0; step < 6000; step++ {
			k := r.IntN(1500)
			idx, pos := x.find(s.entries, k, tagOf(k))
			wantIdx, present := want[k]
			if present {
				require.Equal(t, wantIdx, idx, "seed %d step %d key %d", seed, step, k)
			} else {
				require.Equal(t, none, idx, "seed %d step %d key %d", seed, step, k)
			}
			switch {
			case !present && r.IntN(3) > 0:
				idx = s.alloc(k)
				x.insert(pos, tagOf(k), idx)
				want[k] = idx
			case present:
				x.deleteAt(pos)
				s.release(idx)
				delete(want, k)
			}
			require.Equal(t, len(want), x.n)
		}
		for k, wantIdx := range want {
			idx, _ := x.find(s.entries, k, tagOf(k))
			require.Equal(t, wantIdx, idx)
		}
	}
}

func TestIndexShouldGiveBackItsMemoryWhenEmptied(t *testing.T) {
	tagOf := hashTag
	x := newIndex[int]()
	var s slab[int]
	s.free = none
	for k := 0; k < 2*shrinkAbove; k++ {
		idx, pos := x.find(s.entries, k, tagOf(k))
		x.insert(pos, tagOf(k), s.alloc(k))
		_ = idx
	}
	require.Greater(t, len(x.slots), shrinkAbove)
	for k := 0; k < 2*shrinkAbove; k++ {
		idx, pos := x.find(s.entries, k, tagOf(k))
		require.NotEqual(t, none, idx)
		x.deleteAt(pos)
		s.release(idx)
	}
	require.Equal(t, minIndexSlots, len(x.slots))
	require.Nil(t, s.entries)
}
