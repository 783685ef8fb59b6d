package bench

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// pgTableRow is a row of a followed table as its TableSource decodes it
// (to_jsonb of the row).
type pgTableRow struct {
	Key   string `json:"key"`
	Value pgObj  `json:"value"`
}

// BenchmarkPgstoreTableToInformer measures write → informer handler
// latency for a user's table that pgstore follows (pgstore.Follow), written
// by plain SQL from a pool that has no pgstore DB, as psql or another
// program would: a single-row INSERT of ~550 B of JSON (key text primary
// key, value jsonb) per write, at a steady 500 writes per second from
// pgWriters open-loop writers (createAt), 2500 writes per op after a
// warm-up of 1 s that is not counted. The informer follows the table
// through pgstore.NewTable on a DB of its own: only the table's
// statement trigger's NOTIFY wakes its reader. Reports p50/p99/p999-ms
// from the INSERT's start and -commit-ms from its return, as
// BenchmarkPgstoreWriteToInformer does.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench 'PgstoreTableToInformer$' -benchtime 1x -count 5 .
func BenchmarkPgstoreTableToInformer(b *testing.B) {
	const rate, n = 500, 2500
	var run latencyRun
	for i := range b.N {
		pool := pgBenchPool(b)
		schema := pgBenchSchema(b, pool)
		table := pgx.Identifier{schema}.Sanitize() + ".apps"
		if _, err := pool.Exec(b.Context(), `CREATE TABLE `+table+` (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		if err := pgstore.Follow(b.Context(), pool, schema, table, "apps"); err != nil {
			b.Fatal(err)
		}
		// The informer's DB reads with a pool of its own, so the writers'
		// connections are as foreign to it as psql's.
		readPool := pgBenchPool(b)
		db := must.Do(pgstore.NewDB(readPool, pgstore.WithSchema(schema)))
		b.Cleanup(db.Close)
		rec := recordAdds(b, must.Do(pgstore.NewTable[pgTableRow](db, "apps")))
		w := rawCreator{pool: pool, insert: `INSERT INTO ` + table + ` (key, value) VALUES ($1, $2::jsonb)`}
		run.measure(b, rec, w, fmt.Sprintf("r%d-", i), n, rate)
	}
	run.report(b)
}
