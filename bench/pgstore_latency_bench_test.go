package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// The pgstore latency benchmarks: write → informer handler at a steady rate,
// and the stall a transaction held open causes (docs/design/pgstore.md §8).

// BenchmarkPgstoreWriteToInformer measures write → informer handler
// latency at a steady 1000 writes per second from pgWriters writers, each
// write a Create of a new key (so no two changes of a key fold into one
// event). local: the writers use the informer's DB (its reader is woken in
// process); notify: they use a DB of their own, another process, whose
// NOTIFY wakes the informer's reader. One op is one run of 5 s (5000
// writes) after a warm-up of 1 s that is not counted (warmUp says why):
// use -benchtime 1x, -count for more runs.
//
// Two clocks: p50/p99/p999-ms start before the Create (write + delivery,
// what a program that writes and waits for its informer sees); the
// -commit-ms figures start when the Create returned, the commit done
// (delivery alone; an event that overtakes the Create's reply counts as 0).
// writes/s is the rate the writers reached (createAt: open loop). raw,
// first, is the floor: the same writers at the same rate, each write a
// plain INSERT and no informer (pgRawWrites); its percentiles are the
// writes alone.
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench 'WriteToInformer$' -benchtime 1x -count 3 .
//
// runs it beside BenchmarkEtcdWriteToInformer, the same over etcdstore.
func BenchmarkPgstoreWriteToInformer(b *testing.B) { pgWriteToInformer(b, 1000, 5000) }

// BenchmarkPgstoreWriteToInformer10k is BenchmarkPgstoreWriteToInformer at
// 10 000 writes per second asked, 2 s (20 000 writes) per op; writes/s
// reports what the writers reached.
func BenchmarkPgstoreWriteToInformer10k(b *testing.B) { pgWriteToInformer(b, 10_000, 20_000) }

func pgWriteToInformer(b *testing.B, rate, n int) {
	b.Run("raw", func(b *testing.B) { pgRawWrites(b, rate, n) })
	for _, path := range []string{"local", "notify"} {
		b.Run(path, func(b *testing.B) {
			var run latencyRun
			for i := range b.N {
				pool := pgBenchPool(b)
				schema := pgBenchSchema(b, pool)
				// Closed after the informer stops (cleanups run last first).
				db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
				b.Cleanup(db.Close)
				wdb := db
				if path == "notify" {
					wdb = must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
					b.Cleanup(wdb.Close)
				}
				rec := recordAdds(b, must.Do(pgstore.New[pgObj](db, "objs")))
				run.measure(b, rec, must.Do(pgstore.New[pgObj](wdb, "objs")), fmt.Sprintf("r%d-", i), n, rate)
			}
			run.report(b)
		})
	}
}

// pgRawWrites is the floor of the write → informer benchmarks: the same
// open-loop writers at the same rate on the same kind of pool, each write a
// plain single-row INSERT of the same bytes into a table with only a
// primary key, committed synchronously as write() commits, and no
// informer. Its p50/p99/p999-ms are the writes alone (start → return):
// what the machine gives one statement at that rate, which no store on
// it can beat from the write's start.
func pgRawWrites(b *testing.B, rate, n int) {
	var run latencyRun
	for i := range b.N {
		pool := pgBenchPool(b)
		schema := pgBenchSchema(b, pool)
		w := rawCreator{pool: pool, insert: `INSERT INTO ` + pgx.Identifier{schema}.Sanitize() + `.raw (key, value)
			SELECT $1, $2 FROM (SELECT set_config('synchronous_commit', 'on', true)) s`}
		run.measure(b, nil, w, fmt.Sprintf("r%d-", i), n, rate)
	}
	run.report(b)
}

// rawCreator creates a key with a plain INSERT (pgRawWrites).
type rawCreator struct {
	pool   *pgxpool.Pool
	insert string
}

func (r rawCreator) Create(ctx context.Context, key string, v pgObj) (informer.Revision, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	_, err = r.pool.Exec(ctx, r.insert, key, data)
	return 0, err
}

// creator is what createAt writes through: a Store, or rawCreator.
type creator interface {
	Create(ctx context.Context, key string, v pgObj) (informer.Revision, error)
}

// latencyRun gathers the write → handler latencies of several runs.
type latencyRun struct {
	fromWrite, fromCommit []time.Duration
	rates                 []float64
}

// warmUp is how long measure writes at the asked rate before it measures.
// Every op starts on a new client pool and a new schema: in the first
// 0.5–0.7 s the pool dials up to pgWriters*pgInflight connections, each
// new PostgreSQL backend loads its caches and the statements are prepared,
// and deliveries then take 50–120 ms (seen per 100 ms window on a quiet
// machine, 2026-11-23). That is a cold start, not the steady rate the
// figures are about, so it is written and waited for but not counted.
const warmUp = time.Second

// measure writes at rate for warmUp, then creates n keys (named with
// prefix) through w at rate, and waits for rec's handler to have seen
// them all; only the n count. With rec nil it times the writes alone.
func (l *latencyRun) measure(b *testing.B, rec *addRecorder, w creator, prefix string, n, rate int) {
	warm := int(warmUp) * rate / int(time.Second)
	createAt(b, w, prefix+"warm-", warm, rate)
	start := time.Now()
	writes := createAt(b, w, prefix, n, rate)
	l.rates = append(l.rates, float64(n)/time.Since(start).Seconds())
	if rec == nil {
		for _, wr := range writes {
			l.fromWrite = append(l.fromWrite, wr.end.Sub(wr.start))
		}
		return
	}
	seen := rec.wait(b, warm+n)
	for k, wr := range writes {
		l.fromWrite = append(l.fromWrite, seen[k].Sub(wr.start))
		l.fromCommit = append(l.fromCommit, max(0, seen[k].Sub(wr.end)))
	}
}

// report reports the percentiles over every run and the median rate.
func (l *latencyRun) report(b *testing.B) {
	reportLatency(b, l.fromWrite, "")
	if len(l.fromCommit) > 0 {
		reportLatency(b, l.fromCommit, "-commit")
	}
	b.ReportMetric(median(l.rates), "writes/s")
}

// addRecorder is an informer on a Source whose handler notes when it got
// each key's Add.
type addRecorder struct {
	mu   sync.Mutex
	seen map[string]time.Time
	n    int           // wait's target
	done chan struct{} // closed when seen has n keys
}

// recordAdds runs an informer on src until b ends and waits for its sync.
func recordAdds[V any](b *testing.B, src informer.Source[string, V]) *addRecorder {
	r := &addRecorder{seen: make(map[string]time.Time), n: -1, done: make(chan struct{})}
	inf := must.Do(informer.New[string, V]("pg-latency", src))
	_, err := inf.AddHandler(informer.HandlerFuncs[string, V]{AddFunc: func(k string, _ V, _ bool) {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.seen[k] = now; len(r.seen) == r.n {
			close(r.done)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-ran })
	if err := inf.WaitForSync(b.Context()); err != nil {
		b.Fatal(err)
	}
	return r
}

// wait waits until the handler has seen n keys (30 s at most) and returns
// when it saw each.
func (r *addRecorder) wait(b *testing.B, n int) map[string]time.Time {
	r.mu.Lock()
	if r.n = n; len(r.seen) >= n {
		close(r.done)
	}
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.mu.Lock()
		defer r.mu.Unlock()
		b.Fatalf("the informer saw %d of %d writes in 30 s", len(r.seen), n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// timedWrite is when a Create started and returned.
type timedWrite struct{ start, end time.Time }

// createAt creates n new keys (named with prefix) through w at rate writes
// per second from pgWriters writers, until b's context is done, and returns
// when each write started and returned. Open loop: each writer starts its
// writes on its own ticks, with up to pgInflight of them in flight, so a slow
// write does not hold back the next ones (its latency is counted, not
// hidden); past pgInflight a writer waits, and the rate falls short.
func createAt(b *testing.B, w creator, prefix string, n, rate int) map[string]timedWrite {
	ctx := b.Context()
	var (
		mu     sync.Mutex
		writes = make(map[string]timedWrite, n)
		wg     sync.WaitGroup
	)
	errs := make(chan error, n)
	for wr := range pgWriters {
		wg.Go(func() {
			slots := make(chan struct{}, pgInflight)
			t := time.NewTicker(time.Second * pgWriters / time.Duration(rate))
			defer t.Stop()
			for i := wr; i < n && ctx.Err() == nil; i += pgWriters {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					v := newPgObj(fmt.Sprintf("%sw%d-%d", prefix, wr, i))
					start := time.Now()
					_, err := w.Create(ctx, v.Name, v)
					end := time.Now()
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					mu.Lock()
					writes[v.Name] = timedWrite{start, end}
					mu.Unlock()
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return writes
}

// reportLatency reports p50, p99 and p999 in milliseconds, the metrics'
// names with suffix.
func reportLatency(b *testing.B, lat []time.Duration, suffix string) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50"+suffix+"-ms")
	b.ReportMetric(q(0.99), "p99"+suffix+"-ms")
	b.ReportMetric(q(0.999), "p999"+suffix+"-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPgstoreHoleStall measures the cost of a hole: while writers
// create new keys at 1000 writes per second (through another DB, so the
// NOTIFY path), one transaction takes a revision (a typed write) and stays
// open for pgHold, then commits or rolls back. Every change committed after
// that revision waits for it: the reader may not pass a revision that is
// neither committed nor known aborted.
//
// stall-ms: the longest commit → handler delay of the other writes (about
// pgHold for those committed just after the slow write began). recovery-ms:
// from the slow transaction's end to the handler having every write that
// committed before that end. after-p99-ms: commit → handler p99 of the
// writes that started 100 ms or more after that end (back to normal?). One
// op is one whole run (use -benchtime 1x).
func BenchmarkPgstoreHoleStall(b *testing.B) {
	const pgHold = time.Second
	for _, end := range []string{"commit", "rollback"} {
		b.Run(end, func(b *testing.B) {
			for range b.N {
				pool := pgBenchPool(b)
				schema := pgBenchSchema(b, pool)
				db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
				wdb := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
				b.Cleanup(db.Close) // after the informer stops
				b.Cleanup(wdb.Close)
				rec := recordAdds(b, must.Do(pgstore.New[pgObj](db, "objs")))
				w := must.Do(pgstore.New[pgObj](wdb, "objs"))

				const n = 3000 // 3 s at 1000/s: the hold from 0.5 s to 1.5 s
				wrote := make(chan map[string]timedWrite, 1)
				go func() { wrote <- createAt(b, w, "", n, 1000) }()
				time.Sleep(500 * time.Millisecond)
				tx, err := pool.Begin(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.Exec(b.Context(), `SELECT `+pgx.Identifier{schema}.Sanitize()+`.write('objs', 'slow', 'c', 0, '{}')`); err != nil {
					b.Fatal(err)
				}
				time.Sleep(pgHold)
				if end == "commit" {
					err = tx.Commit(b.Context())
				} else {
					err = tx.Rollback(b.Context())
				}
				if err != nil {
					b.Fatal(err)
				}
				ended := time.Now()
				writes := <-wrote
				total := n
				if end == "commit" {
					total++ // the slow write's key
				}
				seen := rec.wait(b, total)
				var stall, recovery time.Duration
				var after []time.Duration
				for k, wr := range writes {
					d := seen[k].Sub(wr.end)
					stall = max(stall, d)
					if wr.end.Before(ended) {
						recovery = max(recovery, seen[k].Sub(ended))
					}
					if wr.start.After(ended.Add(100 * time.Millisecond)) {
						after = append(after, max(0, d))
					}
				}
				b.ReportMetric(float64(stall.Microseconds())/1000, "stall-ms")
				b.ReportMetric(float64(recovery.Microseconds())/1000, "recovery-ms")
				slices.Sort(after)
				b.ReportMetric(float64(after[len(after)*99/100].Microseconds())/1000, "after-p99-ms")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}
