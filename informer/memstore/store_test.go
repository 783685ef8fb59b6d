package memstore_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testingT is what both testing.T and rapid.T offer the helpers.
type testingT interface {
	require.TestingT
	Helper()
}

// listMap is List as a map, which is what comparisons want: List's order is
// unspecified.
func listMap[K comparable, V any](t testingT, s informer.Source[K, V]) (map[K]V, informer.Revision) {
	t.Helper()
	entries, rev, err := s.List(context.Background())
	require.NoError(t, err)
	m := make(map[K]V, len(entries))
	for _, e := range entries {
		_, dup := m[e.Key]
		require.False(t, dup, "List returned key %v twice", e.Key)
		m[e.Key] = e.Value
	}
	return m, rev
}

func TestNewStoreShouldBeEmptyAtRevisionZero(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	assert.Equal(t, informer.Revision(0), s.Revision())
	assert.Equal(t, 0, s.Len())
	_, _, ok, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.False(t, ok)
	m, rev := listMap(t, s)
	assert.Empty(t, m)
	assert.Equal(t, informer.Revision(0), rev)
}

func TestEveryWriteShouldTakeTheNextRevisionAndBeTheKeysModRevision(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	assert.Equal(t, informer.Revision(1), s.Put("a", 1))
	assert.Equal(t, informer.Revision(2), s.Put("b", 2))
	assert.Equal(t, informer.Revision(3), s.Put("a", 3))

	v, rev, ok, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, v)
	assert.Equal(t, informer.Revision(3), rev)
	_, rev, _, _ = s.Get(t.Context(), "b")
	assert.Equal(t, informer.Revision(2), rev)

	rev, err = s.Delete(t.Context(), "b", 0)
	require.NoError(t, err)
	assert.Equal(t, informer.Revision(4), rev)
	assert.Equal(t, informer.Revision(4), s.Revision())
	assert.Equal(t, 1, s.Len())
}

func TestDeleteOfAMissingKeyShouldChangeNothing(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	s.Put("a", 1)
	rev, err := s.Delete(t.Context(), "missing", 0)
	require.NoError(t, err)
	assert.Equal(t, informer.Revision(0), rev, "0: nothing was deleted")
	assert.Equal(t, informer.Revision(1), s.Revision())
}

func TestCompareAndSwapShouldWriteOnlyAtTheExpectedRevision(t *testing.T) {
	ctx := t.Context()
	// The store holds "a" at revision 1 and "b" at revision 2; the store
	// is at revision 2 before each case.
	tests := []struct {
		name     string
		op       func(s *memstore.Store[string, int]) (informer.Revision, error)
		conflict bool
		want     map[string]int
	}{
		{"Update at the key's revision replaces it",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Update(ctx, "a", 10, 1) },
			false, map[string]int{"a": 10, "b": 2}},
		{"Update at another revision conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Update(ctx, "a", 10, 2) },
			true, map[string]int{"a": 1, "b": 2}},
		{"Create makes a missing key",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Create(ctx, "c", 3) },
			false, map[string]int{"a": 1, "b": 2, "c": 3}},
		{"Create conflicts when the key exists",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Create(ctx, "a", 10) },
			true, map[string]int{"a": 1, "b": 2}},
		{"Update at 0 conflicts: it never creates",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Update(ctx, "c", 3, 0) },
			true, map[string]int{"a": 1, "b": 2}},
		{"Update at a revision conflicts when the key is missing",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Update(ctx, "c", 3, 1) },
			true, map[string]int{"a": 1, "b": 2}},
		{"Delete at the key's revision deletes it",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Delete(ctx, "b", 2) },
			false, map[string]int{"a": 1}},
		{"Delete at another revision conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Delete(ctx, "b", 1) },
			true, map[string]int{"a": 1, "b": 2}},
		{"Delete at a revision of a missing key conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Delete(ctx, "c", 1) },
			true, map[string]int{"a": 1, "b": 2}},
		{"Delete at 0 of an existing key deletes it",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.Delete(ctx, "a", 0) },
			false, map[string]int{"b": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := must.Do(memstore.New[string, int]())
			s.Put("a", 1)
			s.Put("b", 2)

			rev, err := tt.op(s)

			got, _ := listMap(t, s)
			assert.Equal(t, tt.want, got)
			if tt.conflict {
				require.ErrorIs(t, err, informer.ErrConflict)
				assert.Equal(t, informer.Revision(0), rev)
				assert.Equal(t, informer.Revision(2), s.Revision(), "a conflict must not move the revision")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, informer.Revision(3), rev)
			assert.Equal(t, informer.Revision(3), s.Revision())
		})
	}
}

func TestConflictErrorsShouldNameTheKeyAndBothRevisions(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	s.Put("a", 1)
	s.Put("a", 2)
	_, err := s.Update(t.Context(), "a", 3, 1)
	require.ErrorIs(t, err, informer.ErrConflict)
	assert.EqualError(t, err, "memstore: update a at revision 1: key is at revision 2: informer: revision conflict")
}

func TestConcurrentUpdateShouldLetExactlyOneWriterWinEachRevision(t *testing.T) {
	// Increment a counter from many goroutines by read-modify-write: if
	// CAS let two writers through at one revision an increment would be
	// lost.
	s := must.Do(memstore.New[string, int]())
	const writers, increments = 8, 200
	done := make(chan struct{})
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range increments {
				for {
					v, rev, _, _ := s.Get(context.Background(), "n")
					var err error
					if rev == 0 {
						_, err = s.Create(context.Background(), "n", v+1)
					} else {
						_, err = s.Update(context.Background(), "n", v+1, rev)
					}
					if err == nil {
						break
					} else if !errors.Is(err, informer.ErrConflict) {
						panic(err)
					}
				}
			}
		}()
	}
	for range writers {
		<-done
	}
	v, _, _, _ := s.Get(t.Context(), "n")
	assert.Equal(t, writers*increments, v)
	assert.Equal(t, informer.Revision(writers*increments), s.Revision())
}

func TestListShouldReturnEveryEntryAtTheCurrentRevision(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	want := map[string]int{}
	for i, k := range []string{"a", "b", "c", "d"} {
		s.Put(k, i)
		want[k] = i
	}
	_, _ = s.Delete(t.Context(), "b", 0)
	delete(want, "b")
	s.Put("c", 30)
	want["c"] = 30

	got, rev := listMap(t, s)
	assert.Equal(t, want, got)
	assert.Equal(t, informer.Revision(6), rev)
	assert.Equal(t, len(want), s.Len())
}

func TestListShouldReturnTheErrorOfADoneContext(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.List(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestListShouldNotShareItsSliceWithTheStore(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	s.Put("a", 1)
	entries, _, err := s.List(context.Background())
	require.NoError(t, err)
	entries[0].Value = 99
	got, _ := listMap(t, s)
	assert.Equal(t, map[string]int{"a": 1}, got)
}

func TestNewShouldReturnAnErrorForAHistoryBelowOneOrANilOption(t *testing.T) {
	s, err := memstore.New[string, int](memstore.WithHistory(0))
	assert.EqualError(t, err, "memstore.New: WithHistory(0): the history must hold at least one change")
	assert.Nil(t, s)
	_, err = memstore.New[string, int](nil)
	assert.EqualError(t, err, "memstore.New: option 0 is nil")
}

func TestCompactShouldKeepTheCurrentValues(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	s.Put("a", 1)
	s.Put("b", 2)
	_, _ = s.Delete(t.Context(), "a", 0)
	before, _ := listMap(t, s)
	s.Compact(s.Revision())
	after, rev := listMap(t, s)
	assert.True(t, maps.Equal(before, after))
	assert.Equal(t, informer.Revision(3), rev)
}

func TestListShouldKeepCreationOrderAndFillADeletedKeysPlaceWithTheLast(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	for i, k := range []string{"a", "b", "c", "d"} {
		s.Put(k, i)
	}
	s.Put("b", 10) // an update keeps the key's place
	keys := func() []string {
		entries, _, err := s.List(context.Background())
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Key)
		}
		return out
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, keys())
	_, _ = s.Delete(t.Context(), "a", 0)
	assert.Equal(t, []string{"d", "b", "c"}, keys())
	_, _ = s.Delete(t.Context(), "c", 0)
	assert.Equal(t, []string{"d", "b"}, keys())
	v, _, ok, _ := s.Get(t.Context(), "b")
	assert.True(t, ok)
	assert.Equal(t, 10, v)

	// Mass deletes give the memory back and keep every key reachable.
	for i := range 1000 {
		s.Put(string(rune('A'+i%26))+string(rune(i)), i)
	}
	for i := range 990 {
		_, _ = s.Delete(t.Context(), string(rune('A'+i%26))+string(rune(i)), 0)
	}
	assert.Equal(t, 12, s.Len())
	for i := 990; i < 1000; i++ {
		v, _, ok, _ := s.Get(t.Context(), string(rune('A'+i%26))+string(rune(i)))
		assert.True(t, ok)
		assert.Equal(t, i, v)
	}
}

func TestAnInformerOnAStoreShouldReadTheStoresRevisionAsItsHead(t *testing.T) {
	s := must.Do(memstore.New[string, int]())
	s.Put("a", 1)
	rev := s.Put("b", 2)
	inf := must.Do(informer.New[string, int]("ints", s))
	head, ok, err := inf.Head(context.Background())
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, rev, head)
	s.Put("c", 3)
	head, _, _ = inf.Head(context.Background())
	assert.Equal(t, rev+1, head, "read at each call")
}
