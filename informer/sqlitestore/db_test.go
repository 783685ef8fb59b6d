package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

func TestOpenShouldRejectBadOptionsAndPathsWithAClearError(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path string
		opts       sqlitestore.Options
		want       string
	}{
		{"EmptyPath", "", sqlitestore.Options{}, "empty path"},
		{"URI", "file:" + filepath.Join(dir, "a.db"), sqlitestore.Options{}, "plain file name"},
		{"Synchronous", filepath.Join(dir, "a.db"), sqlitestore.Options{Synchronous: "fast"}, `Options.Synchronous "fast"`},
		{"NegativePoll", filepath.Join(dir, "a.db"), sqlitestore.Options{PollInterval: -time.Second}, "Options.PollInterval -1s"},
		{"NegativeBusy", filepath.Join(dir, "a.db"), sqlitestore.Options{BusyTimeout: -time.Second}, "Options.BusyTimeout -1s"},
		{"NoDirectory", filepath.Join(dir, "missing", "a.db"), sqlitestore.Options{}, "sqlitestore: Open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlitestore.Open(t.Context(), tc.path, tc.opts)
			require.Error(t, err)
			assert.Nil(t, db)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReopeningAFileShouldKeepItsKeysAndRevisions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	db, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	require.NoError(t, err)
	rev, err := must.Do(sqlitestore.New[item](db, "items")).Create(t.Context(), "a", item{N: 1})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "a second Close")

	s := must.Do(sqlitestore.New[item](openPath(t, path, sqlitestore.Options{}), "items"))
	v, got, ok, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, item{N: 1}, v)
	assert.Equal(t, rev, got)
	next, err := s.Update(t.Context(), "a", item{N: 2}, got)
	require.NoError(t, err)
	assert.Greater(t, next, rev)
}

func TestACloseShouldEndWatchesAndFailLaterCallsWithErrClosed(t *testing.T) {
	db, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"), sqlitestore.Options{})
	require.NoError(t, err)
	s := must.Do(sqlitestore.New[item](db, "items"))
	_, rev, err := s.List(t.Context())
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		errc <- s.Watch(context.Background(), rev, func(informer.Event[string, item]) error { return nil })
	}()
	require.NoError(t, db.Close())
	require.ErrorIs(t, <-errc, sqlitestore.ErrClosed)
	_, err = s.Create(t.Context(), "a", item{})
	require.ErrorIs(t, err, sqlitestore.ErrClosed)
}

func TestCompactShouldKeepEveryKeysValueAndExpireOlderRevisions(t *testing.T) {
	db := openDB(t, sqlitestore.Options{})
	s := must.Do(sqlitestore.New[item](db, "items"))
	first, err := s.Create(t.Context(), "a", item{N: 1})
	require.NoError(t, err)
	for i := 2; i <= 5; i++ {
		_, err = s.Update(t.Context(), "a", item{N: i}, first+informer.Revision(i-2))
		require.NoError(t, err)
	}
	_, err = s.Create(t.Context(), "gone", item{})
	require.NoError(t, err)
	_, err = s.Delete(t.Context(), "gone", 0)
	require.NoError(t, err)
	_, err = db.Compact(t.Context(), first+100_000)
	require.ErrorContains(t, err, "above the current revision")

	at, err := db.Compact(t.Context(), 0)
	require.NoError(t, err)
	var rows int
	require.NoError(t, outside(t, db.Path()).QueryRowContext(t.Context(), "SELECT count(*) FROM log").Scan(&rows))
	assert.Equal(t, 1, rows, "only a's current value should be left")
	entries, rev, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, at, rev)
	require.Len(t, entries, 1)
	assert.Equal(t, item{N: 5}, entries[0].Value)

	require.ErrorIs(t, watchErr(t, s, first), informer.ErrRevisionExpired)
	again, err := db.Compact(t.Context(), first)
	require.NoError(t, err)
	assert.Equal(t, at, again, "compacting below an earlier compaction changes nothing")
}

func TestTheBackgroundCompactionShouldKeepTheLastRevisionsAndEveryValue(t *testing.T) {
	db := openDB(t, sqlitestore.Options{CompactInterval: -1, CompactKeep: 5})
	s := must.Do(sqlitestore.New[item](db, "items"))
	first, err := s.Create(t.Context(), "old", item{N: 1})
	require.NoError(t, err)
	var revs []informer.Revision
	rev := first
	for i := range 20 {
		rev, err = s.Update(t.Context(), "old", item{N: i + 2}, rev)
		require.NoError(t, err)
		revs = append(revs, rev)
	}
	require.NoError(t, db.CompactOld(t.Context()))

	keep := revs[len(revs)-1] - 5
	require.ErrorIs(t, watchErr(t, s, keep-1), informer.ErrRevisionExpired, "a revision below the kept ones")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []informer.Revision
	err = s.Watch(ctx, keep, func(e informer.Event[string, item]) error {
		if got = append(got, e.Revision); len(got) == 5 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, revs[len(revs)-5:], got, "the kept revisions")
	v, _, ok, err := s.Get(t.Context(), "old")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, item{N: 21}, v)
}

func TestOpenShouldRejectANegativeCompactKeep(t *testing.T) {
	_, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), sqlitestore.Options{CompactKeep: -1})
	require.ErrorContains(t, err, "Options.CompactKeep -1")
}

// watchErr runs a Watch of s after rev that emits nothing and returns its
// error, or context.DeadlineExceeded if it is still running after 10 s.
func watchErr(t *testing.T, s *sqlitestore.Store[item], after informer.Revision) error {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return s.Watch(ctx, after, func(informer.Event[string, item]) error { return nil })
}

func TestOpenShouldTakeAFileNameWithSpacesAndPercentSignsAsItIs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "my state %20 50% ?x=1 #y.db")
	s := must.Do(sqlitestore.New[item](openPath(t, path, sqlitestore.Options{}), "items"))
	_, err := s.Create(t.Context(), "a", item{N: 1})
	require.NoError(t, err)
	_, err = os.Stat(path)
	require.NoError(t, err, "the file should be at the name given")
}

func TestNewShouldReturnAnErrorForANilDBAnEmptyCollectionOrANilOption(t *testing.T) {
	_, err := sqlitestore.New[int](nil, "c")
	assert.EqualError(t, err, `sqlitestore.New: want a DB and a collection name, got db <nil> and collection "c"`)
	db := openDB(t, sqlitestore.Options{})
	_, err = sqlitestore.New[int](db, "")
	assert.ErrorContains(t, err, `sqlitestore.New: want a DB and a collection name`)
	s, err := sqlitestore.New[int](db, "c", nil)
	assert.EqualError(t, err, `sqlitestore.New("c"): option 0 is nil`)
	assert.Nil(t, s)
	entries, _, err := must.Do(sqlitestore.New[int](db, "c")).List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused store wrote")
}
