package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// informerApp is the application name of the informer's sessions, so that
// a test can terminate them.
const informerApp = "pgstore-test-informer"

// harness runs informers on a DB of their own (one process): one over a
// collection written through the typed client and, after followTable, one
// over a table of the same schema written with plain SQL (both feed one
// log, so one's open transactions hold up the other's changes); and
// writers on another DB (another process). It records what the informers'
// handlers are told and what plain Watches beside them emit.
type harness struct {
	t      *testing.T
	schema string
	coll   string        // the typed collection
	pool   *pgxpool.Pool // the writers'
	db     *pgstore.DB   // the informers'
	inf    *informer.Informer[string, item]
	src    informer.Source[string, item]
	typed  *lane
	table  *lane  // nil until followTable
	things string // the followed table, quoted with its schema

	writes, rollbacks, conflicts, failures atomic.Int64
	heldDone                               atomic.Int64 // held transactions that ended as planned
	stop                                   context.CancelFunc
	writers                                sync.WaitGroup
}

// lane is one watched collection of the harness.
type lane struct {
	name string // for messages
	coll string
	inf  *informer.Informer[string, item]
	// want reads the collection's contents with SQL of its own, not
	// through pgstore: what the informer must end equal to.
	want func(ctx context.Context) (map[string]item, error)

	mu      sync.Mutex
	seen    map[string][]told // per key, what the handler was told, in order
	from    int64             // the revision the recording Watch started after
	watched []int64           // revisions of the changes it emitted, in order
}

// told is one call of a handler: a put of the value whose N is n, or
// the key's delete (n: the last value the informer held), delivering the
// change at revision rev; list: from a list or a resync, whose revision is
// the list's, not the value's.
type told struct {
	n    int
	rev  int64
	del  bool
	list bool
}

// newHarness starts the typed collection's informer (on src(store), or the
// DB's Store) and waits for its sync. Writers are started by the test.
func newHarness(t *testing.T, dbOpts []pgstore.DBOption, wrap func(*pgstore.Store[item]) informer.Source[string, item]) *harness {
	t.Helper()
	h := &harness{t: t, pool: newPool(t), coll: newColl()}
	h.schema = newSchema(t, h.pool)
	cfg, err := pgxpool.ParseConfig(testserver.Postgres(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = informerApp
	ipool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(ipool.Close)
	h.db = newDB(t, ipool, h.schema, append([]pgstore.DBOption{pgstore.WithLogger(quiet)}, dbOpts...)...)
	store := must.Do(pgstore.New[item](h.db, h.coll))
	h.src = store
	if wrap != nil {
		h.src = wrap(store)
	}
	s := pgx.Identifier{h.schema}.Sanitize()
	h.typed = &lane{name: "typed", coll: h.coll, want: func(ctx context.Context) (map[string]item, error) {
		rows, err := h.pool.Query(ctx, `SELECT h.key, l.value FROM `+s+`.head h JOIN `+s+`.log l ON l.rev = h.rev
			WHERE h.coll = $1`, h.coll)
		if err != nil {
			return nil, err
		}
		m := make(map[string]item)
		var (
			k    string
			data []byte
		)
		_, err = pgx.ForEachRow(rows, []any{&k, &data}, func() error {
			v, err := informer.JSON[item]{}.Unmarshal(data)
			m[k] = v
			return err
		})
		return m, err
	}}
	h.inf = h.run(h.typed, h.src)
	if wrap == nil {
		h.record(h.typed, must.Do(pgstore.New[item](h.db, h.coll)))
	}
	return h
}

// followTable creates the table things (id text primary key, n, s) in the
// harness's schema, follows it as a collection of the schema, and starts
// its informer and its recording Watch on the informers' DB.
func (h *harness) followTable() {
	t := h.t
	t.Helper()
	h.things = pgx.Identifier{h.schema, "things"}.Sanitize()
	_, err := h.pool.Exec(t.Context(), `CREATE TABLE `+h.things+` (id text PRIMARY KEY, n bigint NOT NULL, s text NOT NULL)`)
	require.NoError(t, err)
	coll := newColl()
	require.NoError(t, pgstore.Follow(t.Context(), h.pool, h.schema, h.things, coll))
	h.table = &lane{name: "table", coll: coll, want: func(ctx context.Context) (map[string]item, error) {
		rows, err := h.pool.Query(ctx, `SELECT id, n, s FROM `+h.things)
		if err != nil {
			return nil, err
		}
		m := make(map[string]item)
		var (
			id string
			v  item
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &v.N, &v.S}, func() error { m[id] = v; return nil })
		return m, err
	}}
	src := must.Do(pgstore.NewTable[item](h.db, coll))
	h.run(h.table, src)
	h.record(h.table, src)
}

// run starts an informer over src that tells l what its handler is
// given, and waits for its sync.
func (h *harness) run(l *lane, src informer.Source[string, item]) *informer.Informer[string, item] {
	t := h.t
	t.Helper()
	l.seen = make(map[string][]told)
	l.inf = must.Do(informer.New[string, item]("pg-"+l.name+"-"+t.Name(), src,
		informer.WithWatchBackoff(backoff.Exponential{Base: 10 * time.Millisecond, Cap: 200 * time.Millisecond}),
		informer.WithLogger(quiet)))
	_, err := l.inf.AddHandler(&teller{l: l})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- l.inf.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-ran) })
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
		h.writers.Wait()
	})
	require.NoError(t, l.inf.WaitForSync(ctxFor(t, 20*time.Second)))
	return l.inf
}

// teller is a lane's handler: it records every call with the revision
// of the change it delivers (informer.RevisionHandler).
type teller struct {
	l   *lane
	rev informer.Revision // the next call's, set right before it
}

func (r *teller) ChangeRevision(rev informer.Revision) { r.rev = rev }

func (r *teller) OnAdd(k string, v item, initialList bool) {
	r.saw(k, told{n: v.N, rev: int64(r.rev), list: initialList})
}

func (r *teller) OnUpdate(k string, _, v item, resync bool) {
	r.saw(k, told{n: v.N, rev: int64(r.rev), list: resync})
}

func (r *teller) OnDelete(k string, last item) {
	r.saw(k, told{n: last.N, rev: int64(r.rev), del: true})
}

func (r *teller) saw(k string, c told) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.seen[k] = append(r.l.seen[k], c)
}

// record runs a plain Watch of src beside l's informer, from a List,
// watching again after its last revision whenever it fails, and records
// the revision of every change it emits: stopAndCheck compares them with
// the log, since an informer's handler need not see every change.
func (h *harness) record(l *lane, src informer.Source[string, item]) {
	t := h.t
	_, rev, err := src.List(t.Context())
	require.NoError(t, err)
	l.from = int64(rev)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := src.Watch(ctx, rev, func(e informer.Event[string, item]) error {
				if e.Type != informer.Bookmark && e.Revision != rev { // a repeat of the last is allowed
					l.mu.Lock()
					l.watched = append(l.watched, int64(e.Revision))
					l.mu.Unlock()
				}
				rev = e.Revision
				return nil
			})
			assert.NotErrorIs(t, err, informer.ErrRevisionExpired)
			_ = sleepCtx(ctx, 10*time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// held is a transaction of a plain-SQL writer held open after its writes.
type held struct {
	writer int           // which plain-SQL writer (0 is the first)
	at     time.Duration // after the writers' start: its next transaction is the held one
	hold   time.Duration
	commit bool // else rolled back
}

// start runs typed writers (a Store on a DB of their own: Get, then
// Create, Update or, a quarter of the time, Delete, on 40 keys) and sql
// writers on the followed table (transactions of one or two INSERT …
// ON CONFLICT, UPDATE or DELETE statements on 40 keys, a quarter of them
// rolled back, and the ones in holds held open) until stopAndCheck. Every
// value written has an N of its own.
func (h *harness) start(typed, sql int, holds ...held) {
	require.True(h.t, sql == 0 || h.table != nil, "plain-SQL writers write the followed table: call followTable")
	db := newDB(h.t, h.pool, h.schema, pgstore.WithLogger(quiet))
	s := must.Do(pgstore.New[item](db, h.coll))
	ctx, stop := context.WithCancel(h.t.Context())
	h.stop = stop
	began := time.Now()
	for w := range typed + sql {
		h.writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			mine := slices.DeleteFunc(slices.Clone(holds), func(x held) bool { return w < typed || x.writer != w-typed })
			for i := 1; ctx.Err() == nil; i++ {
				n := (w+1)*10_000_000 + 10*i // + the statement's index in a transaction
				var err error
				if w < typed {
					opCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
					err = h.typedWrite(opCtx, s, rng, fmt.Sprintf("k%02d", rng.IntN(40)), item{N: n})
					cancel()
				} else {
					tx := held{commit: rng.IntN(4) != 0}
					if len(mine) > 0 && time.Since(began) >= mine[0].at {
						tx, mine = mine[0], mine[1:]
					}
					err = h.sqlWrite(ctx, rng, n, fmt.Sprintf("w%d", w), tx)
				}
				switch {
				case err == nil:
					h.writes.Add(1)
				case errors.Is(err, errRolledBack):
					h.rollbacks.Add(1)
				case errors.Is(err, informer.ErrConflict):
					h.conflicts.Add(1)
				default: // the server may be down
					h.failures.Add(1)
					_ = sleepCtx(ctx, 20*time.Millisecond)
				}
			}
		})
	}
}

func (h *harness) typedWrite(ctx context.Context, s *pgstore.Store[item], rng *rand.Rand, key string, v item) error {
	_, rev, ok, err := s.Get(ctx, key)
	switch {
	case err != nil:
		return err
	case !ok:
		_, err = s.Create(ctx, key, v)
	case rng.IntN(4) == 0:
		_, err = s.Delete(ctx, key, rev)
	default:
		_, err = s.Update(ctx, key, v, rev)
	}
	return err
}

// errRolledBack is sqlWrite's answer for a transaction it rolled back on
// purpose.
var errRolledBack = errors.New("rolled back")

// sqlWrite writes one or two keys of the followed table in one
// transaction, in key order (so that writers wait for each other but never
// deadlock), the values n, n+1; holds it open tx.hold (to its end, even
// if the writers stop), then commits it or rolls it back as tx says.
func (h *harness) sqlWrite(ctx context.Context, rng *rand.Rand, n int, s string, tx held) error {
	if tx.hold > 0 {
		// Held to its end even if the writers stop meanwhile.
		ctx = context.WithoutCancel(ctx)
	}
	opCtx, cancel := context.WithTimeout(ctx, tx.hold+10*time.Second)
	defer cancel()
	t, err := h.pool.Begin(opCtx)
	if err != nil {
		return err
	}
	defer func() { _ = t.Rollback(context.Background()) }()
	keys := []int{rng.IntN(40)}
	if k := rng.IntN(40); rng.IntN(3) == 0 && k != keys[0] {
		keys = append(keys, k)
		slices.Sort(keys)
	}
	for j, k := range keys {
		id := fmt.Sprintf("k%02d", k)
		switch rng.IntN(4) {
		case 0:
			_, err = t.Exec(opCtx, `DELETE FROM `+h.things+` WHERE id = $1`, id)
		case 1:
			_, err = t.Exec(opCtx, `INSERT INTO `+h.things+` (id, n, s) VALUES ($1, $2, $3)
				ON CONFLICT (id) DO UPDATE SET n = excluded.n, s = excluded.s`, id, n+j, s)
		default:
			var tag pgconn.CommandTag
			if tag, err = t.Exec(opCtx, `UPDATE `+h.things+` SET n = $2, s = $3 WHERE id = $1`, id, n+j, s); err == nil && tag.RowsAffected() == 0 {
				_, err = t.Exec(opCtx, `INSERT INTO `+h.things+` (id, n, s) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, id, n+j, s)
			}
		}
		if err != nil {
			return err
		}
	}
	if err := sleepCtx(opCtx, tx.hold); err != nil {
		return err
	}
	if tx.commit {
		err = t.Commit(opCtx)
	} else if err = t.Rollback(opCtx); err == nil {
		err = errRolledBack
	}
	if tx.hold > 0 && (err == nil || errors.Is(err, errRolledBack)) {
		h.heldDone.Add(1)
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
