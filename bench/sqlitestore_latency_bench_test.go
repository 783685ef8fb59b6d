package bench

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// BenchmarkSqlitestoreWriteToInformer measures write → informer handler
// latency at a steady 200 writes per second, each a Create of a new key,
// at the default synchronous level (FULL), with BenchmarkPgstoreWriteToInformer's
// writers and clocks (createAt, latencyRun). local: the writers use the
// informer's DB, whose writes wake its Watch in process; outside: they use
// a DB of their own on the same file, as another process would, seen by
// the informer's DB through its PRAGMA data_version poll (every 100 ms by
// default; outside-10ms polls every 10 ms). One op is one run of 5 s
// (1000 writes) after a warm-up of 1 s that is not counted.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench 'SqlitestoreWriteToInformer' -benchtime 1x -count 3 .
func BenchmarkSqlitestoreWriteToInformer(b *testing.B) {
	const rate, n = 200, 1000
	for _, tc := range []struct {
		name string
		poll time.Duration
	}{{"local", 0}, {"outside", 0}, {"outside-10ms", 10 * time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			var run latencyRun
			for i := range b.N {
				path := filepath.Join(b.TempDir(), "bench.db")
				db := sqliteOpen(b, path, sqlitestore.Options{PollInterval: tc.poll})
				wdb := db
				if tc.name != "local" {
					wdb = sqliteOpen(b, path, sqlitestore.Options{})
				}
				rec := recordAdds(b, must.Do(sqlitestore.New[pgObj](db, "objs")))
				run.measure(b, rec, must.Do(sqlitestore.New[pgObj](wdb, "objs")), fmt.Sprintf("r%d-", i), n, rate)
			}
			run.report(b)
		})
	}
}

// sqliteOpen opens a DB on path, closed when b ends (after the informers
// on it stop: cleanups run last first).
func sqliteOpen(b *testing.B, path string, opts sqlitestore.Options) *sqlitestore.DB {
	b.Helper()
	db, err := sqlitestore.Open(b.Context(), path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// BenchmarkSqlitestorePollCheck measures one change check of a DB's poll:
// PRAGMA data_version on an idle connection, what a DB spends per
// PollInterval when nothing changed. One op is pollChecks checks (so that
// -benchtime 1x measures more than one); reports ns/check.
func BenchmarkSqlitestorePollCheck(b *testing.B) {
	const pollChecks = 10_000
	_, raw := sqliteBenchDB(b, sqlitestore.Options{})
	conn, err := raw.Conn(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var (
		v    int64
		took time.Duration
		n    int
	)
	for b.Loop() {
		start := time.Now()
		for range pollChecks {
			if err := conn.QueryRowContext(b.Context(), "PRAGMA data_version").Scan(&v); err != nil {
				b.Fatal(err)
			}
		}
		took += time.Since(start)
		n += pollChecks
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(n), "ns/check")
}
