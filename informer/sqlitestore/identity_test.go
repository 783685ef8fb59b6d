package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// restore replaces the content of the store at path with that of the
// store at from, in one transaction of a plain connection, as a restore
// of a backup into the live file does.
func restore(t *testing.T, path, from string) {
	t.Helper()
	raw := outside(t, path)
	conn, err := raw.Conn(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close()) }()
	for _, q := range []string{
		"ATTACH DATABASE '" + from + "' AS bk",
		"BEGIN IMMEDIATE",
		"DELETE FROM main.log", "INSERT INTO main.log SELECT * FROM bk.log",
		"DELETE FROM main.head", "INSERT INTO main.head SELECT * FROM bk.head",
		"DELETE FROM main.meta", "INSERT INTO main.meta SELECT * FROM bk.meta",
		"DELETE FROM main.sqlite_sequence", "INSERT INTO main.sqlite_sequence SELECT * FROM bk.sqlite_sequence",
		"COMMIT", "DETACH DATABASE bk",
	} {
		_, err := conn.ExecContext(t.Context(), q)
		require.NoError(t, err, q)
	}
}

// backup copies the store at path to a new file, as VACUUM INTO does for
// a backup of a live file.
func backup(t *testing.T, path string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "backup.db")
	_, err := outside(t, path).ExecContext(t.Context(), "VACUUM INTO '"+to+"'")
	require.NoError(t, err)
	return to
}

// watchUntilError runs a Watch after rev and returns its error channel.
func watchUntilError(t *testing.T, s *sqlitestore.Store[item], rev informer.Revision) <-chan error {
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Watch(ctx, rev, func(informer.Event[string, item]) error { return nil }) }()
	t.Cleanup(func() { cancel(); <-errc })
	out := make(chan error, 1)
	go func() { err := <-errc; out <- err; errc <- err }()
	return out
}

func TestAFileRestoredFromAnOlderBackupExpiresWatchesAndNeverReusesARevision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		poll  time.Duration // an hour: only the next write or list can notice
		write bool          // write after the restore
	}{{"SeenByThePoll", 5 * time.Millisecond, false}, {"SeenByTheNextWrite", time.Hour, true}, {"SeenByTheNextList", time.Hour, false}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			s := must.Do(sqlitestore.New[item](openPath(t, path, sqlitestore.Options{PollInterval: tc.poll}), "items"))
			_, err := s.Create(t.Context(), "a", item{N: 1})
			require.NoError(t, err)
			old := backup(t, path)
			_, err = s.Create(t.Context(), "b", item{N: 2})
			require.NoError(t, err)
			last, err := s.Create(t.Context(), "c", item{N: 3})
			require.NoError(t, err)
			var errc <-chan error
			if tc.name != "SeenByTheNextList" {
				errc = watchUntilError(t, s, last)
			}

			restore(t, path, old)
			if tc.write {
				rev, err := s.Create(t.Context(), "d", item{N: 4})
				require.NoError(t, err)
				assert.Greater(t, rev, last, "a write after the restore reused a revision")
			}
			if errc != nil {
				select {
				case err := <-errc:
					require.ErrorIs(t, err, informer.ErrRevisionExpired)
				case <-time.After(10 * time.Second):
					t.Fatal("the Watch went on after the file went back in time")
				}
			}
			entries, rev, err := s.List(t.Context())
			require.NoError(t, err)
			assert.Greater(t, rev, last, "the relist's revision is not above what was seen")
			assert.NotEmpty(t, entries)
			require.ErrorIs(t, watchErr(t, s, last), informer.ErrRevisionExpired,
				"a Watch from before the restore, after the relist")
		})
	}
}

func TestAFileReplacedByAnotherStoreExpiresWatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := must.Do(sqlitestore.New[item](openPath(t, path, sqlitestore.Options{PollInterval: 5 * time.Millisecond}), "items"))
	_, err := s.Create(t.Context(), "a", item{N: 1})
	require.NoError(t, err)
	_, rev, err := s.List(t.Context())
	require.NoError(t, err)
	errc := watchUntilError(t, s, rev)

	other := filepath.Join(t.TempDir(), "other.db")
	o := must.Do(sqlitestore.New[item](openPath(t, other, sqlitestore.Options{}), "items"))
	for i := range 3 {
		_, err := o.Create(t.Context(), "o"+string(rune('0'+i)), item{N: i})
		require.NoError(t, err)
	}
	restore(t, path, other)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, informer.ErrRevisionExpired)
	case <-time.After(10 * time.Second):
		t.Fatal("the Watch went on in another store's log")
	}
}

// An informer over a file restored from an older backup relists and ends
// with the backup's keys: the ones written after the backup are deleted
// from its cache, though no Delete of them is in any log.
func TestAnInformerShouldConvergeToAFileRestoredFromAnOlderBackup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := must.Do(sqlitestore.New[item](openPath(t, path, sqlitestore.Options{PollInterval: 5 * time.Millisecond}), "items"))
	_, err := s.Create(t.Context(), "a", item{N: 1})
	require.NoError(t, err)
	old := backup(t, path)
	_, err = s.Create(t.Context(), "b", item{N: 2})
	require.NoError(t, err)

	inf := must.Do(informer.New[string, item]("items", s))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = inf.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.NoError(t, inf.WaitForCache(ctx))
	require.Equal(t, 2, inf.Len())

	restore(t, path, old)
	require.Eventually(t, func() bool {
		_, hasB := inf.Get("b")
		a, hasA := inf.Get("a")
		return !hasB && hasA && a.N == 1
	}, 10*time.Second, time.Millisecond, "the informer should have relisted the restored file")
}
