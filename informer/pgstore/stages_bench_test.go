package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// BenchmarkStages splits write → informer handler latency into its stages,
// at 1000 writes per second from 8 writers, each write a Create of a new key
// with a ~550 B value, 5000 writes per op (use -benchtime 1x). local: the
// writers use the informer's DB (a commit wakes the reader in process);
// notify: a DB of their own (another process), whose NOTIFY wakes it;
// table: plain single-row INSERTs (as psql's) into a table the informer
// follows (Follow, NewTable), at 500 writes per second, 2500 per op, the
// table's statement trigger's NOTIFY waking the reader.
//
// Per write, in order (ms, p50 and p99 over the writes, and tail-*: the
// mean of each stage over the writes at or above the total's p99, which
// says what carries the tail):
//
//	commit   the Create, from its start to its return (the commit)
//	wake     commit → the NOTIFY reaching the reader (notify only)
//	toquery  commit or wake → the start of the first read of the log after it
//	hole     that read → the read that returned the write (a hole before
//	         it, a batch, or the Create's reply overtaken: 0)
//	query    the read that returned the write (from the commit if it began before)
//	emit     the read's end → the Watch handing the decoded event to the
//	         informer (a write handed off without a read, local.go: from
//	         the commit, and toquery, hole and query are 0)
//	handler  → the informer's handler (its queue and dispatch)
//
// The benchmark lives in the package's tests because the stage times come
// from an unexported tracer (trace.go).
//
//	CONVERGE_INTEGRATION=1 GOMAXPROCS=2 go test -run '^$' -bench Stages -benchtime 1x -count 3 ./informer/pgstore/
func BenchmarkStages(b *testing.B) {
	for _, path := range []string{"local", "notify", "table"} {
		b.Run(path, func(b *testing.B) {
			var all []stageTimes
			for range b.N {
				all = append(all, runStages(b, path)...)
			}
			reportStages(b, all)
		})
	}
}

const (
	stageWriters  = 8
	stageInflight = 8 // writes a writer may have in flight
	stageWrites   = 5000
	stageRate     = 1000
	stageWarmUp   = time.Second
	// The table path: psql's rate in the issue that asked for it.
	stageTableRate   = 500
	stageTableWrites = 2500
)

// stageRevisions fills in the revision of each write, which a plain INSERT
// into a followed table does not return, from the log.
func stageRevisions(b *testing.B, pool *pgxpool.Pool, schema string, writes map[string]stageWrite) {
	rows, err := pool.Query(b.Context(), `SELECT key, rev FROM `+pgx.Identifier{schema}.Sanitize()+`.log WHERE coll = 'apps'`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var rev int64
		if err := rows.Scan(&k, &rev); err != nil {
			b.Fatal(err)
		}
		if wr, ok := writes[k]; ok {
			wr.rev = rev
			writes[k] = wr
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
}

// stageRecorder is the DB's tracer and the informer's handler.
type stageRecorder struct {
	mu      sync.Mutex
	wakes   []time.Time // NOTIFY arrivals, in order
	queries []stageQuery
	emits   map[int64]time.Time
	seen    map[string]time.Time // handler, by key
	want    int
	done    chan struct{}
}

type stageQuery struct {
	start, end   time.Time
	cursor, next int64
}

func (r *stageRecorder) Wake(local bool, at time.Time) {
	if local {
		return // the commit's own kick, at the Create's return
	}
	r.mu.Lock()
	r.wakes = append(r.wakes, at)
	r.mu.Unlock()
}

func (r *stageRecorder) Query(start, end time.Time, cursor, next, _ int64) {
	r.mu.Lock()
	r.queries = append(r.queries, stageQuery{start, end, cursor, next})
	r.mu.Unlock()
}

func (r *stageRecorder) Emit(rev int64, at time.Time) {
	r.mu.Lock()
	r.emits[rev] = at
	r.mu.Unlock()
}

// stageTimes is one write's stages; total is from the Create's start to the handler.
type stageTimes struct {
	commit, wake, toQuery, hole, query, emit, handler, total time.Duration
	at                                                       time.Duration // the write's start, from its run's first
}

// stageNames are the stages in order, as reported.
var stageNames = []string{"commit", "wake", "toquery", "hole", "query", "emit", "handler", "total"}

func (s stageTimes) get(i int) time.Duration {
	return [...]time.Duration{s.commit, s.wake, s.toQuery, s.hole, s.query, s.emit, s.handler, s.total}[i]
}

type stageWrite struct {
	rev        int64
	start, end time.Time
}

// stageWriteAt creates n keys (named with prefix) through create at rate
// from stageWriters writers, open loop as the bench module's createAt:
// each writer starts a write on each of its ticks, with up to
// stageInflight in flight, so a slow write does not delay the next one's
// start (its latency is counted, not hidden). It returns every write.
func stageWriteAt(b *testing.B, create func(ctx context.Context, key string) (int64, error), prefix string, n, rate int) map[string]stageWrite {
	writes := make(map[string]stageWrite, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for wr := range stageWriters {
		wg.Go(func() {
			slots := make(chan struct{}, stageInflight)
			t := time.NewTicker(time.Second * stageWriters / time.Duration(rate))
			defer t.Stop()
			for i := wr; i < n; i += stageWriters {
				<-t.C
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					k := fmt.Sprintf("%sw%d-%d", prefix, wr, i)
					start := time.Now()
					rev, err := create(b.Context(), k)
					end := time.Now()
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					writes[k] = stageWrite{int64(rev), start, end}
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

func runStages(b *testing.B, path string) []stageTimes {
	notify := path != "local"
	cfg, err := pgxpool.ParseConfig(testserver.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = stageWriters*stageInflight + 4 // the writes in flight, the reader, LISTEN, NOTIFY
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close) // after the schema's drop and the DBs' Close
	schema := newSchema(b, pool)
	rec := &stageRecorder{emits: make(map[int64]time.Time), seen: make(map[string]time.Time), want: -1, done: make(chan struct{})}
	db := newDB(b, pool, schema)
	pgstore.SetTracer(db, rec)
	wdb := db
	if notify {
		wdb = newDB(b, pool, schema)
	}
	var src informer.Source[string, stageValue] = must.Do(pgstore.New[stageValue](db, "objs"))
	w := must.Do(pgstore.New[stageValue](wdb, "objs"))
	create := func(ctx context.Context, k string) (int64, error) {
		rev, err := w.Create(ctx, k, newStageValue(k))
		return int64(rev), err
	}
	rate, n := stageRate, stageWrites
	table := pgx.Identifier{schema}.Sanitize() + ".apps"
	if path == "table" {
		rate, n = stageTableRate, stageTableWrites
		if _, err := pool.Exec(b.Context(), `CREATE TABLE `+table+` (key text COLLATE "C" PRIMARY KEY, name text, labels jsonb, spec text)`); err != nil {
			b.Fatal(err)
		}
		if err := pgstore.Follow(b.Context(), pool, schema, table, "apps"); err != nil {
			b.Fatal(err)
		}
		src = must.Do(pgstore.NewTable[stageValue](db, "apps"))
		insert := `INSERT INTO ` + table + ` (key, name, labels, spec) VALUES ($1, $1, $2, $3)`
		create = func(ctx context.Context, k string) (int64, error) {
			v := newStageValue(k)
			_, err := pool.Exec(ctx, insert, k, v.Labels, v.Spec)
			return 0, err // the revision is read from the log after the run
		}
	}
	inf := must.Do(informer.New[string, stageValue]("stages", src))
	_, err = inf.AddHandler(informer.HandlerFuncs[string, stageValue]{AddFunc: func(k string, _ stageValue, _ bool) {
		now := time.Now()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.seen[k] = now; len(rec.seen) == rec.want {
			close(rec.done)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	if err := inf.WaitForSync(b.Context()); err != nil {
		b.Fatal(err)
	}

	// Warm up at the same rate, uncounted: a new pool dials its
	// connections and their backends warm up in the first 0.5-0.7 s
	// (bench/pgstore_latency_bench_test.go, warmUp).
	warm := rate * int(stageWarmUp/time.Second)
	stageWriteAt(b, create, "warm-", warm, rate)
	writes := stageWriteAt(b, create, "", n, rate)
	if path == "table" {
		stageRevisions(b, pool, schema, writes)
	}
	rec.mu.Lock()
	if rec.want = len(writes) + warm; len(rec.seen) == rec.want {
		close(rec.done)
	}
	rec.mu.Unlock()
	select {
	case <-rec.done:
	case <-time.After(30 * time.Second):
		b.Fatal("the informer did not see every write in 30 s")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]stageTimes, 0, len(writes))
	var first time.Time
	for _, wr := range writes {
		if first.IsZero() || wr.start.Before(first) {
			first = wr.start
		}
	}
	b.Logf("the run's first counted write started at %s", first.Format("15:04:05.000"))
	for k, wr := range writes {
		st := rec.stages(wr, rec.seen[k], notify)
		st.at = wr.start.Sub(first)
		out = append(out, st)
	}
	return out
}

// stages places one write on the reader's timeline.
func (r *stageRecorder) stages(wr stageWrite, handled time.Time, notify bool) stageTimes {
	s := stageTimes{commit: wr.end.Sub(wr.start), total: handled.Sub(wr.start)}
	from := wr.end // when the reader could first have seen it
	if notify {
		if i := sort.Search(len(r.wakes), func(i int) bool { return !r.wakes[i].Before(wr.end) }); i < len(r.wakes) {
			s.wake = r.wakes[i].Sub(wr.end)
			from = r.wakes[i]
		}
	}
	// The read that returned it (queries are in order, their cursors
	// rising), if any: a commit of the watching process may be handed off
	// without one.
	qi := sort.Search(len(r.queries), func(i int) bool { return r.queries[i].next >= wr.rev })
	if qi == len(r.queries) || r.queries[qi].cursor >= wr.rev {
		s.emit = max(0, r.emits[wr.rev].Sub(from))
		s.handler = handled.Sub(r.emits[wr.rev])
		return s
	}
	q := r.queries[qi]
	// The first read after the commit (or the wake-up).
	fi := sort.Search(len(r.queries), func(i int) bool { return !r.queries[i].start.Before(from) })
	switch {
	case q.start.Before(from): // the read overtook the Create's reply
		s.query = max(0, q.end.Sub(from))
	case fi < len(r.queries):
		f := r.queries[fi]
		s.toQuery = f.start.Sub(from)
		s.hole = q.start.Sub(f.start)
		s.query = q.end.Sub(q.start)
	}
	emitted := r.emits[wr.rev]
	readEnd := q.end
	if readEnd.Before(from) {
		readEnd = from
	}
	s.emit = max(0, emitted.Sub(readEnd))
	s.handler = handled.Sub(emitted)
	return s
}

// reportStages reports each stage's p50 and p99 and its mean over the
// writes in the total's tail (at or above its p99), in milliseconds.
func reportStages(b *testing.B, all []stageTimes) {
	slices.SortFunc(all, func(a, b stageTimes) int { return int(a.total - b.total) })
	tail := all[len(all)*99/100:]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// When the tail's writes started, from the first write of their run
	// (-v): clustered, one event stalled everything (a GC, a checkpoint,
	// autovacuum); spread out, it is each write's own luck.
	when := make([]string, len(tail))
	for i, s := range tail {
		when[i] = fmt.Sprintf("%.0f:%.1f", ms(s.at), ms(s.total))
	}
	slices.Sort(when)
	b.Logf("tail writes, start ms from their run's first write : total ms: %s", strings.Join(when, " "))
	for i, name := range stageNames {
		v := make([]time.Duration, len(all))
		for j, s := range all {
			v[j] = s.get(i)
		}
		slices.Sort(v)
		b.ReportMetric(ms(v[len(v)/2]), "p50-"+name+"-ms")
		b.ReportMetric(ms(v[len(v)*99/100]), "p99-"+name+"-ms")
		var sum time.Duration
		for _, s := range tail {
			sum += s.get(i)
		}
		b.ReportMetric(ms(sum/time.Duration(len(tail))), "tail-"+name+"-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// stageValue is a value of about 550 B of JSON.
type stageValue struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Spec   string            `json:"spec"`
}

func newStageValue(name string) stageValue {
	return stageValue{Name: name, Labels: map[string]string{"app": "web", "tier": "frontend", "team": "payments"},
		Spec: strings.Repeat("x", 450)}
}
