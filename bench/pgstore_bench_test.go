package bench

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// The pgstore benchmarks (docs/design/pgstore.md, Measured, has their
// figures) run against the test PostgreSQL of scripts/servers.sh:
//
//	scripts/servers.sh start; eval "$(scripts/servers.sh env)"
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench Pgstore -benchtime 1x .
//	scripts/servers.sh stop
//
// Without a server they skip (with CONVERGE_INTEGRATION=1 they fail).

const (
	pgWriters  = 8 // concurrent writers, as the write targets assume
	pgInflight = 8 // writes a writer may have in flight (createAt)
	pgSyncObjs = 100_000
)

// pgObj is a value of about 550 B of JSON, like the informer benchmarks'
// objects: a ReplicaSet-like body and a name.
type pgObj struct {
	benchRS
	Name string `json:"name"`
}

func newPgObj(name string) pgObj {
	v := pgObj{benchRS: newBenchValue(), Name: name}
	v.Spec.Labels = map[string]string{"app": "web", "tier": "frontend", "team": "payments", "env": "production",
		"region": "eu-west-1", "version": "v1.2.3", "owner": "converge-bench", "cost-centre": "cc-0042-platform"}
	return v
}

// pgBenchPool connects to the test server, or skips b without one, with
// room for the writers' writes in flight, the reader and the LISTEN
// connection.
func pgBenchPool(b *testing.B, opts ...func(*pgxpool.Config)) *pgxpool.Pool {
	b.Helper()
	if os.Getenv(testserver.PostgresDSNEnv) == "" && !testserver.Integration() {
		b.Skipf("SKIPPED: %s is not set, so there is no PostgreSQL to measure. Start the servers and run again: "+
			`scripts/servers.sh start; eval "$(scripts/servers.sh env)"; go -C bench test -run '^$' -bench Pgstore .; scripts/servers.sh stop`,
			testserver.PostgresDSNEnv)
	}
	cfg, err := pgxpool.ParseConfig(testserver.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = pgWriters*pgInflight + 4
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// pgBenchSchema sets up a fresh schema (with a plain table "raw" for the
// floors) and drops it when b ends.
func pgBenchSchema(b *testing.B, pool *pgxpool.Pool) string {
	b.Helper()
	name := "bench_pg_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := pgstore.Setup(b.Context(), pool, name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	if _, err := pool.Exec(b.Context(), `CREATE TABLE `+pgx.Identifier{name}.Sanitize()+
		`.raw (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return name
}

// pgLoad fills the collection "objs" of schema (through write(), as the
// typed client would, in one statement) and the plain table raw with n
// objects of about 550 B, the same bytes in both.
func pgLoad(b *testing.B, pool *pgxpool.Pool, schema string, n int) {
	b.Helper()
	tmpl, err := json.Marshal(newPgObj("NAME"))
	if err != nil {
		b.Fatal(err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	value := `convert_to(replace($1, '"NAME"', '"k' || g || '"'), 'UTF8')`
	for _, q := range []string{
		`SELECT count(` + s + `.write('objs', 'k' || g, 'c', 0, ` + value + `)) FROM generate_series(1, $2) g`,
		`INSERT INTO ` + s + `.raw SELECT 'k' || g, ` + value + ` FROM generate_series(1, $2) g`,
		`VACUUM ANALYZE ` + s + `.log`, `VACUUM ANALYZE ` + s + `.raw`,
	} {
		args := []any{string(tmpl), n}
		if strings.HasPrefix(q, "VACUUM") {
			args = nil
		}
		if _, err := pool.Exec(b.Context(), q, args...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPgstoreInitialSync measures an informer's initial sync of
// pgSyncObjs objects of ~550 B of JSON through pgstore (List: hole check,
// one snapshot of the latest row of every key, decode; cache), against the
// floor (one SELECT of a plain table with the same bytes, decoded into maps
// on two goroutines) and against etcdstore on the same objects in the
// test etcd. One op is one sync of each, in an order that rotates so that
// each sees the same load; reports each one's median and the medians of
// the per-op ratios pgstore/floor and pgstore/etcdstore: the floor moves
// 0.8-3 s between rounds with the machine's load, so read those ratios, and
// give it 9 rounds.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench PgstoreInitialSync -benchtime 9x .
func BenchmarkPgstoreInitialSync(b *testing.B) {
	pool := pgBenchPool(b)
	schema := pgBenchSchema(b, pool)
	pgLoad(b, pool, schema, pgSyncObjs)
	cli := etcdBenchClient(b)
	prefix := "/converge-bench/pgsync/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
	etcdLoad(b, cli, prefix, pgSyncObjs)
	b.Cleanup(func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) })

	timeSyncs(b, pgSyncObjs, []syncRun{
		{"floor", func() int { return pgFloorSync(b, pool, schema) }},
		{"pgstore", func() int { return pgstoreSync(b, pool, schema) }},
		{"etcdstore", func() int { return etcdstoreSync(b, cli, prefix) }},
	}, [2]int{1, 0}, [2]int{1, 2})
}

// pgstoreSync runs an informer over the collection objs of schema until it
// has synced and returns how many objects its cache holds.
func pgstoreSync(b *testing.B, pool *pgxpool.Pool, schema string) int {
	db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
	defer db.Close()
	return syncInformer(b, must.Do(pgstore.New[pgObj](db, "objs")))
}

// syncInformer runs an informer over src until it has synced and returns
// how many objects its cache holds.
func syncInformer(b *testing.B, src informer.Source[string, pgObj]) int {
	inf := must.Do(informer.New[string, pgObj]("store-sync", src))
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(ctx) }()
	if err := inf.WaitForSync(b.Context()); err != nil {
		b.Fatal(err)
	}
	n := inf.Len()
	cancel()
	<-ran
	return n
}

// etcdBenchClient connects to the test etcd, or skips b without one (with
// CONVERGE_INTEGRATION=1 it fails), with room for a 100k-object Get.
func etcdBenchClient(b *testing.B) *clientv3.Client {
	b.Helper()
	if os.Getenv(testserver.EtcdEndpointsEnv) == "" && !testserver.Integration() {
		b.Skipf("SKIPPED: %s is not set, so there is no etcd to measure. Start the servers and run again: "+
			`scripts/servers.sh start; eval "$(scripts/servers.sh env)"; go -C bench test -run '^$' -bench %s .; scripts/servers.sh stop`,
			testserver.EtcdEndpointsEnv, strings.TrimPrefix(b.Name(), "Benchmark"))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(b), DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// pgFloorSync reads every row of raw with one SELECT and decodes the values
// into two maps on two goroutines, and returns how many it decoded.
func pgFloorSync(b *testing.B, pool *pgxpool.Pool, schema string) int {
	type kv struct {
		key   string
		value []byte
	}
	batches := make(chan []kv, 4)
	maps := [2]map[string]pgObj{make(map[string]pgObj), make(map[string]pgObj)}
	var wg sync.WaitGroup
	for i := range maps {
		wg.Go(func() {
			for batch := range batches {
				for _, r := range batch {
					var v pgObj
					if err := json.Unmarshal(r.value, &v); err != nil {
						panic(err)
					}
					maps[i][r.key] = v
				}
			}
		})
	}
	rows, err := pool.Query(b.Context(), `SELECT key, value FROM `+pgx.Identifier{schema}.Sanitize()+`.raw`)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]kv, 0, 1000)
	for rows.Next() {
		var r kv
		if err := rows.Scan(&r.key, &r.value); err != nil {
			b.Fatal(err)
		}
		if batch = append(batch, r); len(batch) == cap(batch) {
			batches <- batch
			batch = make([]kv, 0, 1000)
		}
	}
	batches <- batch
	close(batches)
	wg.Wait()
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return len(maps[0]) + len(maps[1])
}

// BenchmarkPgstoreWrite measures write throughput from pgWriters writers,
// each updating keys of its own among 10 000, each write waited for before
// the next: typed, Store.Update (a compare-and-swap through write(), one
// round trip, synchronous commit); raw (the floor), a single-row INSERT …
// ON CONFLICT DO UPDATE of a plain table, one round trip, with
// synchronous_commit on as well (the server's default here is off; with
// fsync off neither waits for a disk); typed-silent, typed through a DB
// that sends no NOTIFY (WithNotifyInterval(-1)), to price the notifier. One
// op is pgWriteOps writes of each, in turns first; reports each one's
// median writes/s and the median of the per-op ratios typed/raw.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench 'PgstoreWrite$' -benchtime 3x .
func BenchmarkPgstoreWrite(b *testing.B) {
	const keys = 10_000
	pool := pgBenchPool(b, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["synchronous_commit"] = "on" })
	schema := pgBenchSchema(b, pool)
	pgLoad(b, pool, schema, keys)
	db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
	defer db.Close()
	store := must.Do(pgstore.New[pgObj](db, "objs"))
	// The same writes from a DB that sends no NOTIFY: what the notifier
	// costs the writes (docs/design/pgstore.md, Alternatives measured).
	quietDB := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema), pgstore.WithNotifyInterval(-1)))
	defer quietDB.Close()
	quiet := must.Do(pgstore.New[pgObj](quietDB, "objs"))
	upsert := `INSERT INTO ` + pgx.Identifier{schema}.Sanitize() + `.raw (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`
	// Every key's revision, so that a typed write is one Update (a writer
	// is the only one to write its keys).
	heads := make(map[string]informer.Revision, keys)
	rows, err := pool.Query(b.Context(), `SELECT key, rev FROM `+pgx.Identifier{schema}.Sanitize()+`.head`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var (
			k   string
			rev int64
		)
		if err := rows.Scan(&k, &rev); err != nil {
			b.Fatal(err)
		}
		heads[k] = informer.Revision(rev)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex // heads, between the writers
	write := map[string]func(k string, v pgObj) error{
		"raw": func(k string, v pgObj) error {
			data, _ := json.Marshal(v)
			_, err := pool.Exec(b.Context(), upsert, k, data)
			return err
		},
		"typed":        typedUpdate(b, store, &mu, heads),
		"typed-silent": typedUpdate(b, quiet, &mu, heads),
	}
	rates := map[string][]float64{}
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		kinds := []string{"raw", "typed", "typed-silent"}
		if i%2 == 1 {
			kinds = []string{"typed-silent", "typed", "raw"}
		}
		for _, kind := range kinds {
			rates[kind] = append(rates[kind], pgWriteRate(b, write[kind], i, keys))
		}
		ratios = append(ratios, rates["typed"][i]/rates["raw"][i])
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(rates["raw"]), "raw-writes/s")
	b.ReportMetric(median(rates["typed"]), "typed-writes/s")
	b.ReportMetric(median(rates["typed-silent"]), "silent-writes/s")
	b.ReportMetric(median(ratios), "typed/raw")
}

// typedUpdate returns a write of the store write benchmarks through store:
// one Update at the key's revision in heads (guarded by mu), which it advances.
func typedUpdate(b *testing.B, store informer.ReadWriter[string, pgObj], mu *sync.Mutex, heads map[string]informer.Revision) func(k string, v pgObj) error {
	return func(k string, v pgObj) error {
		mu.Lock()
		rev := heads[k]
		mu.Unlock()
		rev, err := store.Update(b.Context(), k, v, rev)
		if err == nil {
			mu.Lock()
			heads[k] = rev
			mu.Unlock()
		}
		return err
	}
}

// pgWriteOps is how many writes BenchmarkPgstoreWrite times per kind and op.
const pgWriteOps = 20_000

// pgWriteRate runs pgWriteOps writes from pgWriters writers, each waiting
// for its write before the next, and returns the writes per second.
func pgWriteRate(b *testing.B, write func(k string, v pgObj) error, op, keys int) float64 {
	return writeRate(b, write, op, keys, pgWriters, pgWriteOps)
}
