package bench

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/informer/pgstore"
)

// BenchmarkPgstoreTableWrite measures what following a user's table costs
// its writers (the trigger path's cost on a user's table):
// pgWriters writers, each waiting for its write before the next, each a
// single-row INSERT … ON CONFLICT DO UPDATE of ~550 B of JSON into one of
// three identical tables (key text primary key, value jsonb) of 10 000
// rows, each writer on keys of its own: plain (not followed, the floor),
// followed (pgstore.Follow: the row trigger appends every change to the
// log and the statement trigger sends a NOTIFY), and followed-nonotify
// (Follow WithoutNotify). Every session commits synchronously, as the
// trigger makes a followed table's writers do (with the test server's
// fsync off neither waits for a disk). One op is pgWriteOps writes of each,
// in an order that rotates; reports each one's median writes/s and the
// medians of the per-op ratios followed/plain and followed-nonotify/plain.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench 'PgstoreTableWrite$' -benchtime 3x .
func BenchmarkPgstoreTableWrite(b *testing.B) {
	const keys = 10_000
	pool := pgBenchPool(b, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["synchronous_commit"] = "on" })
	schema := pgBenchSchema(b, pool)
	s := pgx.Identifier{schema}.Sanitize()
	kinds := []struct {
		name, table string
		follow      []pgstore.FollowOption // nil: not followed
	}{
		{"plain", "plain", nil},
		{"followed", "followed", []pgstore.FollowOption{}},
		{"followed-nonotify", "nonotify", []pgstore.FollowOption{pgstore.WithoutNotify()}},
	}
	tmpl, err := json.Marshal(newPgObj("NAME"))
	if err != nil {
		b.Fatal(err)
	}
	write := make(map[string]func(k string, v pgObj) error, len(kinds))
	for _, kind := range kinds {
		table := s + "." + kind.table
		for _, q := range []string{
			`CREATE TABLE ` + table + ` (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL)`,
			`INSERT INTO ` + table + ` SELECT 'k' || g, replace($1, '"NAME"', '"k' || g || '"')::jsonb FROM generate_series(1, ` +
				fmt.Sprint(keys) + `) g`,
			`VACUUM ANALYZE ` + table,
		} {
			var args []any
			if q[0] == 'I' {
				args = []any{string(tmpl)}
			}
			if _, err := pool.Exec(b.Context(), q, args...); err != nil {
				b.Fatal(err)
			}
		}
		if kind.follow != nil {
			if err := pgstore.Follow(b.Context(), pool, schema, table, kind.table, kind.follow...); err != nil {
				b.Fatal(err)
			}
		}
		upsert := `INSERT INTO ` + table + ` (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`
		write[kind.name] = func(k string, v pgObj) error {
			data, _ := json.Marshal(v)
			_, err := pool.Exec(b.Context(), upsert, k, string(data))
			return err
		}
	}
	rates := map[string][]float64{}
	ratios := map[string][]float64{}
	for i := 0; b.Loop(); i++ {
		for j := range kinds {
			kind := kinds[(i+j)%len(kinds)].name
			rates[kind] = append(rates[kind], pgWriteRate(b, write[kind], i, keys))
		}
		for _, kind := range kinds[1:] {
			ratios[kind.name] = append(ratios[kind.name], rates[kind.name][i]/rates["plain"][i])
		}
	}
	b.ReportMetric(0, "ns/op")
	for _, kind := range kinds {
		b.ReportMetric(median(rates[kind.name]), kind.name+"-writes/s")
	}
	for _, kind := range kinds[1:] {
		b.ReportMetric(median(ratios[kind.name]), kind.name+"/plain")
	}
}
