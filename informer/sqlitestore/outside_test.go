package sqlitestore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// sqlite3 returns the sqlite3 command line (CONVERGE_SQLITE3, from
// scripts/servers.sh, or PATH), skipping the test without one unless
// CONVERGE_INTEGRATION is set.
func sqlite3(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CONVERGE_SQLITE3"); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		if os.Getenv("CONVERGE_INTEGRATION") != "" {
			t.Fatal("no sqlite3 on PATH: run scripts/servers.sh start, which installs it")
		}
		t.Skip("no sqlite3 on PATH (scripts/servers.sh start installs it)")
	}
	return bin
}

// TestTheSqlite3CommandLineWritesReachARunningInformer follows the
// package documentation's recipe with the real sqlite3 command line, and
// checks that a running informer takes each write, within a bound of the
// poll interval plus slack for a loaded machine, and that a bad value is
// a bad key, not a stop.
func TestTheSqlite3CommandLineWritesReachARunningInformer(t *testing.T) {
	bin := sqlite3(t)
	const poll = 20 * time.Millisecond
	path := filepath.Join(t.TempDir(), "store.db")
	db := openPath(t, path, sqlitestore.Options{PollInterval: poll})
	s := must.Do(sqlitestore.New[item](db, "items"))
	inf := must.Do(informer.New[string, item]("items", s))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = inf.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.NoError(t, inf.WaitForCache(ctx))

	run := func(sql string) time.Time {
		out, err := exec.Command(bin, path, sql).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return time.Now()
	}
	// The bound the documentation states is the poll interval plus one
	// read; a second covers a loaded machine without hiding a missed poll
	// (the informer would then never see the write).
	const bound = time.Second
	waitFor := func(what string, since time.Time, cond func() bool) {
		t.Helper()
		for !cond() {
			require.Less(t, time.Since(since), bound, "%s: not seen within %v", what, bound)
			time.Sleep(time.Millisecond)
		}
	}
	at := run(`INSERT INTO objects (coll, key, value) VALUES ('items', 'web', '{"n": 3, "s": "x"}')`)
	waitFor("insert", at, func() bool { v, ok := inf.Get("web"); return ok && v.N == 3 })
	at = run(`UPDATE objects SET value = '{"n": 5, "s": "x"}' WHERE coll = 'items' AND key = 'web'`)
	waitFor("update", at, func() bool { v, ok := inf.Get("web"); return ok && v.N == 5 })
	at = run(`INSERT INTO objects (coll, key, value) VALUES ('items', 'bad', '{"n": "three"}')`)
	waitFor("bad value", at, func() bool { return len(inf.BadKeys()) == 1 })
	at = run(`DELETE FROM objects WHERE coll = 'items' AND key IN ('web', 'bad')`)
	waitFor("delete", at, func() bool { _, ok := inf.Get("web"); return !ok && len(inf.BadKeys()) == 0 })

	v, _, ok, err := s.Get(t.Context(), "web")
	require.NoError(t, err)
	assert.False(t, ok, "deleted through the view: %v", v)
	checkLog(t, path)
}
