package memstore_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// snapshot is a List as a map.
func snapshot(t *testing.T, entries []informer.Entry[int, int]) map[int]int {
	t.Helper()
	m := map[int]int{}
	for _, e := range entries {
		_, twice := m[e.Key]
		require.False(t, twice, "key %d listed twice", e.Key)
		m[e.Key] = e.Value
	}
	return m
}

// randomWrites makes n random puts, updates and deletes over 8 keys and
// returns what List said after each revision (index = revision).
func randomWrites(t *testing.T, s *memstore.Store[int, int], seed uint64, n int) []map[int]int {
	rnd := rand.New(rand.NewPCG(seed, 1))
	lists := []map[int]int{{}}
	for len(lists) <= n {
		k := rnd.IntN(8)
		if rnd.IntN(3) == 0 {
			if rev, err := s.Delete(context.Background(), k, 0); err != nil || rev == 0 {
				continue // absent: no revision
			}
		} else {
			s.Put(k, rnd.IntN(1000))
		}
		es, rev, err := s.List(context.Background())
		require.NoError(t, err)
		require.Equal(t, informer.Revision(len(lists)), rev)
		lists = append(lists, snapshot(t, es))
	}
	return lists
}

func TestListAtShouldReturnWhatListReturnedAtThatRevision(t *testing.T) {
	for seed := range uint64(20) {
		s := must.Do(memstore.New[int, int]())
		lists := randomWrites(t, s, seed, 60)
		for rev, want := range lists {
			es, err := s.ListAt(t.Context(), informer.Revision(rev))
			require.NoError(t, err, "seed %d rev %d", seed, rev)
			assert.Equal(t, want, snapshot(t, es), "seed %d rev %d", seed, rev)
		}
	}
}

// With a short history, ListAt either answers right or says the history
// no longer knows; it always knows the current state and never a revision
// below the history's start.
func TestListAtShouldBeRightOrExpiredWhenTheHistoryIsShort(t *testing.T) {
	known := 0
	for seed := range uint64(20) {
		s := must.Do(memstore.New[int, int](memstore.WithHistory(16)))
		lists := randomWrites(t, s, seed, 60)
		for rev, want := range lists {
			es, err := s.ListAt(t.Context(), informer.Revision(rev))
			switch {
			case rev < 60-16:
				require.ErrorIs(t, err, informer.ErrRevisionExpired, "seed %d rev %d", seed, rev)
			case err == nil:
				known++
				assert.Equal(t, want, snapshot(t, es), "seed %d rev %d", seed, rev)
			case rev == 60:
				t.Fatalf("seed %d: the current state is always known: %v", seed, err)
			default:
				require.ErrorIs(t, err, informer.ErrRevisionExpired)
			}
		}
	}
	assert.Greater(t, known, 20*17/4, "many revisions in the history are still listable")
}

func TestListAtShouldRefuseARevisionAheadOfTheStore(t *testing.T) {
	s := must.Do(memstore.New[int, int]())
	s.Put(1, 1)
	_, err := s.ListAt(t.Context(), 2)
	require.ErrorIs(t, err, informer.ErrRevisionExpired)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.ListAt(ctx, 1)
	require.ErrorIs(t, err, context.Canceled)
}
