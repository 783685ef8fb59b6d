package pgstore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// BenchmarkWriteToWatch measures the time from the start of a write (a
// Create, one round trip) to its event in a Watch, one write at a time, and reports its p50 and p99:
//
//   - local: the writer and the Watch share a DB (one process): the write
//     wakes the reader in-process.
//   - notify: another DB (another process) writes; the watching DB LISTENs
//     (poll every 1 s), so the NOTIFY sent after the write wakes it.
//   - pollOnly: the watching DB polls every 10 ms (WithPollOnly), the
//     writer sends no NOTIFY.
//
// CONVERGE_INTEGRATION=1 go test -run '^$' -bench WriteToWatch -benchtime 2000x ./informer/pgstore/
func BenchmarkWriteToWatch(b *testing.B) {
	for _, c := range []struct {
		name          string
		watch, writer []pgstore.DBOption
		shared        bool
	}{
		{name: "local", shared: true},
		{name: "notify"},
		{name: "pollOnly", watch: []pgstore.DBOption{pgstore.WithPollOnly()}, writer: []pgstore.DBOption{pgstore.WithNotifyInterval(-1)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			pool, err := pgxpool.New(b.Context(), testserver.Postgres(b))
			require.NoError(b, err)
			defer pool.Close()
			schema := "cvb_" + strconv.FormatInt(time.Now().UnixNano(), 36)
			require.NoError(b, pgstore.Setup(b.Context(), pool, schema))
			defer func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) }()
			wdb := must.Do(pgstore.NewDB(pool, append([]pgstore.DBOption{pgstore.WithSchema(schema)}, c.watch...)...))
			defer wdb.Close()
			rdb := wdb
			if !c.shared {
				rdb = must.Do(pgstore.NewDB(pool, append([]pgstore.DBOption{pgstore.WithSchema(schema)}, c.writer...)...))
				defer rdb.Close()
			}
			r, w := must.Do(pgstore.New[item](wdb, "c")), must.Do(pgstore.New[item](rdb, "c"))
			_, rev, err := r.List(b.Context())
			require.NoError(b, err)
			got := make(chan time.Time, 1)
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() {
				done <- r.Watch(ctx, rev, func(e informer.Event[string, item]) error {
					if e.Type != informer.Bookmark {
						got <- time.Now()
					}
					return nil
				})
			}()
			defer func() { cancel(); <-done }()
			time.Sleep(100 * time.Millisecond) // LISTEN connected
			var lat []time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				_, err := w.Create(b.Context(), "k"+strconv.Itoa(i), item{N: i})
				require.NoError(b, err)
				lat = append(lat, (<-got).Sub(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
