package bench

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// The sqlitestore benchmarks need no server: each works on a file in a
// temporary directory.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench Sqlitestore -benchtime 1x -count 3 .

const (
	sqliteSyncObjs = 100_000
	sqliteWriters  = 4
	sqliteWriteOps = 2_000 // per kind and op: fsync-bound, about a second each
)

// sqliteBenchDB opens a DB on a new file, closed when b ends, and a plain
// connection pool on the same file (the floors), with the DB's settings.
func sqliteBenchDB(b *testing.B, opts sqlitestore.Options) (*sqlitestore.DB, *sql.DB) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	db, err := sqlitestore.Open(b.Context(), path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	sync := opts.Synchronous
	if sync == "" {
		sync = sqlitestore.SynchronousFull
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=synchronous("+string(sync)+")&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = raw.Close() })
	if _, err := raw.ExecContext(b.Context(), "CREATE TABLE raw (key TEXT PRIMARY KEY, value BLOB NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	return db, raw
}

// sqliteLoad writes n objects k1..kn to collection objs (through the
// objects view, one transaction) and to the plain table raw.
func sqliteLoad(b *testing.B, raw *sql.DB, n int) {
	b.Helper()
	tx, err := raw.BeginTx(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for i := 1; i <= n; i++ {
		k := "k" + strconv.Itoa(i)
		data, _ := json.Marshal(newPgObj(k))
		if _, err := tx.ExecContext(b.Context(), "INSERT INTO objects (coll, key, value) VALUES ('objs', ?, ?)", k, data); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(b.Context(), "INSERT INTO raw (key, value) VALUES (?, ?)", k, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSqlitestoreInitialSync measures an informer's initial sync of
// sqliteSyncObjs objects of ~550 B of JSON through sqlitestore (List in
// one read transaction, decode, cache) against the floor: one SELECT of a
// plain table in the same file with the same bytes, decoded into a map on
// one goroutine, as List decodes. One op is one sync of each, in turns;
// reports each one's median and the median of the per-op ratios.
func BenchmarkSqlitestoreInitialSync(b *testing.B) {
	db, raw := sqliteBenchDB(b, sqlitestore.Options{Synchronous: sqlitestore.SynchronousNormal})
	sqliteLoad(b, raw, sqliteSyncObjs)
	store := must.Do(sqlitestore.New[pgObj](db, "objs"))
	timeSyncs(b, sqliteSyncObjs, []syncRun{
		{"floor", func() int { return sqliteFloorSync(b, raw) }},
		{"sqlitestore", func() int { return syncInformer(b, store) }},
	}, [2]int{1, 0})
}

// sqliteFloorSync reads every row of raw with one SELECT, decodes each
// value into a map and returns how many it decoded.
func sqliteFloorSync(b *testing.B, raw *sql.DB) int {
	rows, err := raw.QueryContext(b.Context(), "SELECT key, value FROM raw")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	m := make(map[string]pgObj)
	for rows.Next() {
		var (
			k    string
			data []byte
			v    pgObj
		)
		if err := rows.Scan(&k, &data); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
		m[k] = v
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return len(m)
}

// BenchmarkSqlitestoreWrite measures write throughput from sqliteWriters
// writers, each updating keys of its own among 1 000, each write waited
// for before the next, at the default synchronous level (FULL: every
// commit synced): typed, Store.Update (a compare-and-swap: a BEGIN
// IMMEDIATE transaction that reads the key's head, appends to the log and
// moves the head); raw (the floor), a single-row INSERT … ON CONFLICT DO
// UPDATE of a plain table in the same file, through one connection of its
// own (SQLite has one writer per file either way). One op is sqliteWriteOps
// writes of each, in turns; reports the median writes/s and the median of
// the per-op ratios typed/raw.
func BenchmarkSqlitestoreWrite(b *testing.B) {
	const keys = 1_000
	db, raw := sqliteBenchDB(b, sqlitestore.Options{})
	// One connection, as the DB's writer: several would contend for the
	// file's write lock and sleep in SQLite's busy handler.
	raw.SetMaxOpenConns(1)
	sqliteLoad(b, raw, keys)
	store := must.Do(sqlitestore.New[pgObj](db, "objs"))
	entries, _, err := store.List(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	heads := make(map[string]informer.Revision, keys)
	for _, e := range entries {
		heads[e.Key] = e.Revision
	}
	var mu sync.Mutex
	write := map[string]func(k string, v pgObj) error{
		"raw": func(k string, v pgObj) error {
			data, _ := json.Marshal(v)
			_, err := raw.ExecContext(b.Context(), "INSERT INTO raw (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", k, data)
			return err
		},
		"typed": typedUpdate(b, store, &mu, heads),
	}
	rates := map[string][]float64{}
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		kinds := []string{"raw", "typed"}
		if i%2 == 1 {
			slices.Reverse(kinds)
		}
		for _, kind := range kinds {
			rates[kind] = append(rates[kind], writeRate(b, write[kind], i, keys, sqliteWriters, sqliteWriteOps))
		}
		ratios = append(ratios, rates["typed"][i]/rates["raw"][i])
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(rates["raw"]), "raw-writes/s")
	b.ReportMetric(median(rates["typed"]), "typed-writes/s")
	b.ReportMetric(median(ratios), "typed/raw")
}

// writeRate runs ops writes from writers writers, each waiting for its
// write before the next, and returns the writes per second.
func writeRate(b *testing.B, write func(k string, v pgObj) error, op, keys, writers, ops int) float64 {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := time.Now()
	for wr := range writers {
		wg.Go(func() {
			for i := wr; i < ops; i += writers {
				k := "k" + strconv.Itoa(1+(i%keys))
				v := newPgObj(k)
				v.Status.Ready = op*ops + i
				if err := write(k, v); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	rate := float64(ops) / time.Since(start).Seconds()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return rate
}
