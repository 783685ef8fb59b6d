package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/testserver"
)

// informerApp is the application name of the informer's sessions, so that
// a test can terminate them.
const informerApp = "pgstore-test-informer"

// harness runs an informer on a DB of its own (one process) over one
// collection, and writers on another DB (another process), and records
// what the informer's handler is told.
type harness struct {
	t      *testing.T
	schema string
	coll   string
	pool   *pgxpool.Pool // the writers'
	inf    *informer.Informer[string, item]
	src    informer.Source[string, item]

	mu      sync.Mutex
	seen    map[string][]int // per key, the N of every value the handler got
	from    int64            // the revision the recording Watch started after
	watched map[int64]bool   // revisions of the changes it emitted

	writes, conflicts, failures atomic.Int64
	stop                        context.CancelFunc
	writers                     sync.WaitGroup
}

// newHarness starts the informer (on src(db), or the DB's Store) and waits
// for its sync. Writers are started by the test (typed, raw).
func newHarness(t *testing.T, dbOpts []pgstore.DBOption, wrap func(*pgstore.Store[item]) informer.Source[string, item]) *harness {
	t.Helper()
	h := &harness{t: t, pool: newPool(t), coll: newColl(), seen: make(map[string][]int), watched: make(map[int64]bool)}
	h.schema = newSchema(t, h.pool)
	cfg, err := pgxpool.ParseConfig(testserver.Postgres(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = informerApp
	ipool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(ipool.Close)
	db := newDB(t, ipool, h.schema, append([]pgstore.DBOption{pgstore.WithLogger(quiet)}, dbOpts...)...)
	store := pgstore.New[item](db, h.coll)
	h.src = store
	if wrap != nil {
		h.src = wrap(store)
	}
	h.inf = informer.New[string, item]("pg-"+t.Name(), h.src,
		informer.WithWatchBackoff(backoff.Exponential{Base: 10 * time.Millisecond, Cap: 200 * time.Millisecond}),
		informer.WithLogger(quiet))
	_, err = h.inf.AddHandler(informer.HandlerFuncs[string, item]{
		AddFunc:    func(k string, v item, _ bool) { h.saw(k, v) },
		UpdateFunc: func(k string, _, v item, _ bool) { h.saw(k, v) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.inf.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-ran) })
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
		h.writers.Wait()
	})
	require.NoError(t, h.inf.WaitForSync(ctxFor(t, 20*time.Second)))
	if wrap == nil {
		h.record(t, pgstore.New[item](db, h.coll))
	}
	return h
}

// record runs a plain Watch on the informer's DB beside it, from a List,
// watching again after its last revision whenever it fails, and records
// the revision of every change it emits: stopAndCheck compares them with
// the log, since an informer's handler need not see every change.
func (h *harness) record(t *testing.T, s *pgstore.Store[item]) {
	_, rev, err := s.List(t.Context())
	require.NoError(t, err)
	h.from = int64(rev)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := s.Watch(ctx, rev, func(e informer.Event[string, item]) error {
				rev = e.Revision
				if e.Type != informer.Bookmark {
					h.mu.Lock()
					h.watched[int64(e.Revision)] = true
					h.mu.Unlock()
				}
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

func (h *harness) saw(k string, v item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[k] = append(h.seen[k], v.N)
}

// start runs typed writers (through a Store on a DB of their own) and raw
// writers (explicit transactions calling the schema's write(), held open
// up to hold, a quarter of them rolled back) until stopAndCheck.
func (h *harness) start(typed, raw int, hold time.Duration) {
	db := newDB(h.t, h.pool, h.schema, pgstore.WithLogger(quiet))
	s := pgstore.New[item](db, h.coll)
	ctx, stop := context.WithCancel(h.t.Context())
	h.stop = stop
	for w := range typed + raw {
		h.writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 1; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("k%02d", rng.IntN(40))
				v := item{N: (w+1)*1_000_000 + i}
				opCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
				var err error
				if w < typed {
					err = h.typedWrite(opCtx, s, rng, key, v)
				} else {
					err = h.rawWrite(opCtx, rng, key, v, hold)
				}
				cancel()
				switch {
				case err == nil:
					h.writes.Add(1)
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

func (h *harness) rawWrite(ctx context.Context, rng *rand.Rand, key string, v item, hold time.Duration) error {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	w := `SELECT ` + pgx.Identifier{h.schema}.Sanitize() + `.write($1, $2, $3::"char", 0, $4)`
	data, _ := informer.JSON[item]{}.Marshal(v)
	var r int64
	if rng.IntN(4) == 0 {
		err = tx.QueryRow(ctx, w, h.coll, key, "d", nil).Scan(&r)
	} else if err = tx.QueryRow(ctx, w, h.coll, key, "u", data).Scan(&r); err == nil && r < 0 {
		err = tx.QueryRow(ctx, w, h.coll, key, "c", data).Scan(&r)
	}
	if err != nil {
		return err
	}
	if hold > 0 && rng.IntN(3) == 0 {
		if err := sleepCtx(ctx, time.Duration(rng.Int64N(int64(hold)))); err != nil {
			return err
		}
	}
	if rng.IntN(4) == 0 {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stopAndCheck stops the writers, waits until the informer's cache equals
// a List of the collection, and checks that per key the handler was given
// only committed values, each newer than the one before (by the log, when
// history is kept: not after a compaction).
func (h *harness) stopAndCheck(history bool) {
	t := h.t
	if h.stop != nil {
		h.stop()
	}
	h.writers.Wait()
	require.Positive(t, h.writes.Load())
	// A write whose client gave up (cancelled) may still commit on the
	// server a moment later: compare with a List taken again until equal.
	lister := pgstore.New[item](newDB(t, h.pool, h.schema), h.coll)
	var want map[string]item
	cache := func() map[string]item {
		m := make(map[string]item)
		for _, e := range h.inf.List() {
			m[e.Key] = e.Value
		}
		return m
	}
	if !assert.Eventually(t, func() bool {
		want = h.list(lister)
		return assert.ObjectsAreEqual(want, cache())
	}, 20*time.Second, 10*time.Millisecond) {
		assert.Equal(t, want, cache(), "informer cache vs List")
	}
	if !history {
		return
	}
	// Every committed change reached the recording Watch, none other.
	var logged map[int64]bool
	recorded := func() map[int64]bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return maps.Clone(h.watched)
	}
	if !assert.Eventually(t, func() bool {
		require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT coalesce(jsonb_object_agg(rev, true), '{}') FROM `+
			pgx.Identifier{h.schema}.Sanitize()+`.log WHERE coll = $1 AND rev > $2`, h.coll, h.from).Scan(&logged))
		return maps.Equal(logged, recorded())
	}, 20*time.Second, 10*time.Millisecond) {
		got := recorded()
		for r := range logged {
			assert.True(t, got[r], "change at revision %d never emitted", r)
		}
		for r := range got {
			assert.True(t, logged[r], "emitted revision %d is not a change of the collection", r)
		}
	}
	require.NotEmpty(t, logged)
	revOf := make(map[int]int64) // value N -> revision of its committed write
	rows, err := h.pool.Query(t.Context(), `SELECT rev, value FROM `+pgx.Identifier{h.schema}.Sanitize()+
		`.log WHERE coll = $1 AND op = 'p'`, h.coll)
	require.NoError(t, err)
	for rows.Next() {
		var (
			rev  int64
			data []byte
		)
		require.NoError(t, rows.Scan(&rev, &data))
		v, err := informer.JSON[item]{}.Unmarshal(data)
		require.NoError(t, err)
		revOf[v.N] = rev
	}
	require.NoError(t, rows.Err())
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, ns := range h.seen {
		var last int64
		for _, n := range ns {
			rev, ok := revOf[n]
			if !assert.True(t, ok, "key %s: value %d was never committed", k, n) {
				continue
			}
			assert.Greater(t, rev, last, "key %s: value %d (revision %d) after one at %d", k, n, rev, last)
			last = rev
		}
	}
}

// list reads the collection through s, retrying while the server comes
// back.
func (h *harness) list(s *pgstore.Store[item]) map[string]item {
	var entries []informer.Entry[string, item]
	require.Eventually(h.t, func() bool {
		var err error
		entries, _, err = s.List(h.t.Context())
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)
	m := make(map[string]item, len(entries))
	for _, e := range entries {
		m[e.Key] = e.Value
	}
	return m
}
