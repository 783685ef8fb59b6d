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
	s := memstore.New[string, int]()
	assert.Equal(t, informer.Revision(0), s.Revision())
	assert.Equal(t, 0, s.Len())
	_, _, ok := s.Get("a")
	assert.False(t, ok)
	m, rev := listMap(t, s)
	assert.Empty(t, m)
	assert.Equal(t, informer.Revision(0), rev)
}

func TestEveryWriteShouldTakeTheNextRevisionAndBeTheKeysModRevision(t *testing.T) {
	s := memstore.New[string, int]()
	assert.Equal(t, informer.Revision(1), s.Put("a", 1))
	assert.Equal(t, informer.Revision(2), s.Put("b", 2))
	assert.Equal(t, informer.Revision(3), s.Put("a", 3))

	v, rev, ok := s.Get("a")
	require.True(t, ok)
	assert.Equal(t, 3, v)
	assert.Equal(t, informer.Revision(3), rev)
	_, rev, _ = s.Get("b")
	assert.Equal(t, informer.Revision(2), rev)

	rev, existed := s.Delete("b")
	assert.True(t, existed)
	assert.Equal(t, informer.Revision(4), rev)
	assert.Equal(t, informer.Revision(4), s.Revision())
	assert.Equal(t, 1, s.Len())
}

func TestDeleteOfAMissingKeyShouldChangeNothing(t *testing.T) {
	s := memstore.New[string, int]()
	s.Put("a", 1)
	rev, existed := s.Delete("missing")
	assert.False(t, existed)
	assert.Equal(t, informer.Revision(1), rev, "the current revision")
	assert.Equal(t, informer.Revision(1), s.Revision())
}

func TestCompareAndSwapShouldWriteOnlyAtTheExpectedRevision(t *testing.T) {
	// The store holds "a" at revision 1 and "b" at revision 2; the store
	// is at revision 2 before each case.
	tests := []struct {
		name     string
		op       func(s *memstore.Store[string, int]) (informer.Revision, error)
		conflict bool
		want     map[string]int
	}{
		{"PutIf at the key's revision replaces it",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.PutIf("a", 10, 1) },
			false, map[string]int{"a": 10, "b": 2}},
		{"PutIf at another revision conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.PutIf("a", 10, 2) },
			true, map[string]int{"a": 1, "b": 2}},
		{"PutIf at 0 creates a missing key",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.PutIf("c", 3, 0) },
			false, map[string]int{"a": 1, "b": 2, "c": 3}},
		{"PutIf at 0 conflicts when the key exists",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.PutIf("a", 10, 0) },
			true, map[string]int{"a": 1, "b": 2}},
		{"PutIf at a revision conflicts when the key is missing",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.PutIf("c", 3, 1) },
			true, map[string]int{"a": 1, "b": 2}},
		{"DeleteIf at the key's revision deletes it",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.DeleteIf("b", 2) },
			false, map[string]int{"a": 1}},
		{"DeleteIf at another revision conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.DeleteIf("b", 1) },
			true, map[string]int{"a": 1, "b": 2}},
		{"DeleteIf of a missing key conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.DeleteIf("c", 1) },
			true, map[string]int{"a": 1, "b": 2}},
		{"DeleteIf at 0 of a missing key conflicts: nothing was deleted",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.DeleteIf("c", 0) },
			true, map[string]int{"a": 1, "b": 2}},
		{"DeleteIf at 0 of an existing key conflicts",
			func(s *memstore.Store[string, int]) (informer.Revision, error) { return s.DeleteIf("a", 0) },
			true, map[string]int{"a": 1, "b": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New[string, int]()
			s.Put("a", 1)
			s.Put("b", 2)

			rev, err := tt.op(s)

			got, _ := listMap(t, s)
			assert.Equal(t, tt.want, got)
			if tt.conflict {
				require.ErrorIs(t, err, memstore.ErrConflict)
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
	s := memstore.New[string, int]()
	s.Put("a", 1)
	s.Put("a", 2)
	_, err := s.PutIf("a", 3, 1)
	require.ErrorIs(t, err, memstore.ErrConflict)
	assert.EqualError(t, err, "put a at revision 1: key is at revision 2: memory: revision conflict")
}

func TestConcurrentPutIfShouldLetExactlyOneWriterWinEachRevision(t *testing.T) {
	// Increment a counter from many goroutines by read-modify-write: if
	// CAS let two writers through at one revision an increment would be
	// lost.
	s := memstore.New[string, int]()
	const writers, increments = 8, 200
	done := make(chan struct{})
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range increments {
				for {
					v, rev, _ := s.Get("n")
					if _, err := s.PutIf("n", v+1, rev); err == nil {
						break
					} else if !errors.Is(err, memstore.ErrConflict) {
						panic(err)
					}
				}
			}
		}()
	}
	for range writers {
		<-done
	}
	v, _, _ := s.Get("n")
	assert.Equal(t, writers*increments, v)
	assert.Equal(t, informer.Revision(writers*increments), s.Revision())
}

func TestListShouldReturnEveryEntryAtTheCurrentRevision(t *testing.T) {
	s := memstore.New[string, int]()
	want := map[string]int{}
	for i, k := range []string{"a", "b", "c", "d"} {
		s.Put(k, i)
		want[k] = i
	}
	s.Delete("b")
	delete(want, "b")
	s.Put("c", 30)
	want["c"] = 30

	got, rev := listMap(t, s)
	assert.Equal(t, want, got)
	assert.Equal(t, informer.Revision(6), rev)
	assert.Equal(t, len(want), s.Len())
}

func TestListShouldReturnTheErrorOfADoneContext(t *testing.T) {
	s := memstore.New[string, int]()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.List(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestListShouldNotShareItsSliceWithTheStore(t *testing.T) {
	s := memstore.New[string, int]()
	s.Put("a", 1)
	entries, _, err := s.List(context.Background())
	require.NoError(t, err)
	entries[0].Value = 99
	got, _ := listMap(t, s)
	assert.Equal(t, map[string]int{"a": 1}, got)
}

func TestNewShouldPanicOnAHistoryBelowOne(t *testing.T) {
	assert.PanicsWithValue(t,
		"memory: WithHistory(0): the history must hold at least one change",
		func() { memstore.New[string, int](memstore.WithHistory(0)) })
}

func TestCompactShouldKeepTheCurrentValues(t *testing.T) {
	s := memstore.New[string, int]()
	s.Put("a", 1)
	s.Put("b", 2)
	s.Delete("a")
	before, _ := listMap(t, s)
	s.Compact(s.Revision())
	after, rev := listMap(t, s)
	assert.True(t, maps.Equal(before, after))
	assert.Equal(t, informer.Revision(3), rev)
}

func TestListShouldKeepCreationOrderAndFillADeletedKeysPlaceWithTheLast(t *testing.T) {
	s := memstore.New[string, int]()
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
	s.Delete("a")
	assert.Equal(t, []string{"d", "b", "c"}, keys())
	s.Delete("c")
	assert.Equal(t, []string{"d", "b"}, keys())
	v, _, ok := s.Get("b")
	assert.True(t, ok)
	assert.Equal(t, 10, v)

	// Mass deletes give the memory back and keep every key reachable.
	for i := range 1000 {
		s.Put(string(rune('A'+i%26))+string(rune(i)), i)
	}
	for i := range 990 {
		s.Delete(string(rune('A'+i%26)) + string(rune(i)))
	}
	assert.Equal(t, 12, s.Len())
	for i := 990; i < 1000; i++ {
		v, _, ok := s.Get(string(rune('A'+i%26)) + string(rune(i)))
		assert.True(t, ok)
		assert.Equal(t, i, v)
	}
}
