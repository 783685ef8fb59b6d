package pgstore

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/listdecode"
)

// queries are the statements of a Store, built once from the quoted schema.
type queries struct {
	get, write, writeXid, head, gaps, fill, list, read, catchUp, bounds, anchored, compact string
}

// The reader's statements run on every wake-up, so their plans must be
// cheap to execute and estimated cheap too: an estimate above PostgreSQL's
// jit_above_cost (100 000 by default) JIT-compiles the statement on every
// execution, 15-150 ms each on the test machine, which was most of the
// write-to-event tail (docs/design/pgstore.md, "One reader per schema"). Hence meta by its
// primary key (an unanalyzed meta is estimated at 1270 rows) and the
// batch as a constant (a LIMIT parameter is estimated at a tenth of the
// log in a generic plan). plan_test.go checks the estimates.
func newQueries(s string, batch int) queries {
	// The expiry bounds: one row, and estimated as one.
	bounds := `(SELECT m.compact_rev, m.base, q.last_value FROM ` + s + `.meta m CROSS JOIN ` + s + `.rev q WHERE m.id = 1)`
	// The same, and the row at revision $N as an anchor (anchor.go) sees it.
	anchored := func(n string) string {
		return `(SELECT m.compact_rev, m.base, q.last_value, a.xmin::text::bigint AS xid, a.coll, a.key, a.op
	FROM ` + s + `.meta m CROSS JOIN ` + s + `.rev q LEFT JOIN ` + s + `.log a ON a.rev = $` + n + ` WHERE m.id = 1)`
	}
	limit := strconv.Itoa(batch)
	return queries{
		get:   `SELECT l.rev, l.value FROM ` + s + `.head h JOIN ` + s + `.log l ON l.rev = h.rev WHERE h.coll = $1 AND h.key = $2`,
		write: `SELECT ` + s + `.write($1, $2, $3::"char", $4, $5)`,
		// The same, and the writing transaction (NULL if none: nothing
		// written), for the local hand-off. OFFSET 0 keeps write() in a
		// subquery evaluated before the outer select list.
		writeXid: `SELECT w.r, pg_current_xact_id_if_assigned()::text::bigint FROM (SELECT ` + s +
			`.write($1, $2, $3::"char", $4, $5) AS r OFFSET 0) w`,
		// The revision a List is at: every change committed before it, and
		// never below the compaction revision (an empty log).
		head: `SELECT greatest((SELECT max(rev) FROM ` + s + `.log), compact_rev), compact_rev FROM ` + s + `.meta`,
		// The holes between $1 (resolved) and $2 (a log row's revision).
		// The count first (a one-time filter: PostgreSQL skips the window
		// scan when it is false): with no hole there are exactly $2 - $1
		// rows, and counting them is ~10x cheaper than sorting them into
		// pairs (16 vs 207 ms for a List's first 100k revisions).
		gaps: `SELECT r + 1, n - 1 FROM (SELECT r, lead(r) OVER (ORDER BY r) AS n FROM
	(SELECT $1::bigint AS r UNION ALL SELECT rev FROM ` + s + `.log WHERE rev > $1 AND rev <= $2) x) y WHERE n > r + 1
	AND (SELECT count(*) FROM ` + s + `.log WHERE rev > $1 AND rev <= $2) < $2::bigint - $1::bigint`,
		// ON CONFLICT DO NOTHING waits for an in-flight writer of the same
		// revision, then yields to its row or, if it aborted, fills.
		fill: `SELECT ` + s + `.fill($1, $2)`,
		list: `SELECT key, value, rev FROM (SELECT DISTINCT ON (key) key, op, value, rev FROM ` + s + `.log
	WHERE coll = $1 AND rev <= $2 ORDER BY key, rev DESC) x WHERE op = 'p'`,
		// The reader's poll, one snapshot: the expiry bounds, the DB's
		// anchor ($3) as it is now, and the next rows of every collection,
		// with the values of the watched ones and the transaction that
		// wrote each (a row's anchor).
		read: `SELECT b.compact_rev, b.base, b.last_value, b.xid, b.coll, b.key, b.op,
		l.rev, l.coll, l.key, l.op, l.xid, CASE WHEN l.coll = ANY($2::text[]) THEN l.value END
	FROM ` + anchored("3") + ` b
	LEFT JOIN LATERAL (SELECT rev, coll, key, op, value, xmin::text::bigint AS xid FROM ` + s + `.log
		WHERE rev > $1 ORDER BY rev LIMIT ` + limit + `) l ON true ORDER BY l.rev`,
		// A Watch behind the reader: resolved rows of one collection.
		catchUp: `SELECT b.compact_rev, b.base, b.last_value, l.rev, l.key, l.op, l.value
	FROM ` + bounds + ` b
	LEFT JOIN LATERAL (SELECT * FROM ` + s + `.log WHERE rev > $1 AND rev <= $2 AND coll = $3 ORDER BY rev LIMIT ` + limit + `) l ON true ORDER BY l.rev`,
		bounds: `SELECT compact_rev, base, last_value FROM ` + bounds + ` b`,
		// A Watch's check: the bounds and the DB's anchor ($1).
		anchored: `SELECT compact_rev, base, last_value, xid, coll, key, op FROM ` + anchored("1") + ` b`,
		// Forget history up to $1: fills, deletes and superseded values.
		compact: `WITH c AS (UPDATE ` + s + `.meta SET compact_rev = greatest(compact_rev, $1) RETURNING compact_rev)
	DELETE FROM ` + s + `.log l USING c WHERE l.rev <= c.compact_rev AND (l.op <> 'p' OR EXISTS (
		SELECT 1 FROM ` + s + `.log n WHERE n.coll = l.coll AND n.key = l.key AND n.rev > l.rev AND n.rev <= c.compact_rev))`,
	}
}

// resolve makes every revision up to hi either a change or a fill: it
// waits FillAfter if it finds holes, then fills the ones left. hi must be
// a log row's revision or the compaction revision.
func (s *Store[V]) resolve(ctx context.Context, lo, hi int64) error {
	for try := 0; ; try++ {
		rows, err := s.pool.Query(ctx, s.q.gaps, lo, hi)
		if err != nil {
			return err
		}
		gaps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
			var g [2]int64
			err := r.Scan(&g[0], &g[1])
			return g, err
		})
		if err != nil || len(gaps) == 0 {
			return err
		}
		if try == 0 {
			if err := sleep(ctx, s.db.opts.fillAfter); err != nil {
				return err
			}
			continue
		}
		for _, g := range gaps {
			if _, err := s.pool.Exec(ctx, s.q.fill, g[0], g[1]); err != nil {
				return err
			}
		}
		return nil
	}
}

// resolveHead returns the newest revision committed (at least the
// compaction revision) once every revision up to it is resolved. Holes are
// looked for only above what this Store resolved before, and above the
// compaction revision, below which rows may be gone.
func (s *Store[V]) resolveHead(ctx context.Context) (int64, error) {
	var m, compacted int64
	if err := s.pool.QueryRow(ctx, s.q.head).Scan(&m, &compacted); err != nil {
		return 0, err
	}
	lo := max(compacted, s.db.resolved.Load())
	if lo >= m {
		return m, nil
	}
	if err := s.resolve(ctx, lo, m); err != nil {
		return 0, err
	}
	s.db.noteResolved(m)
	return m, nil
}

// List returns every live key of the collection at a revision M below
// which no hole remains: M is the newest change committed before List
// began, holes below it are resolved (waiting for slow writers), and the
// keys are read in one snapshot that still holds every change up to M.
// Every entry carries its value's revision. A value that does not decode
// is an entry with Err set to a *DecodeError and no Value; it fails
// nothing.
func (s *Store[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	return s.listBy(ctx, s.q.list)
}

// listBy is List with query, which selects key, value and rev of the live
// keys at the revision $2 of the collection $1, given args as $3 on.
func (s *Store[V]) listBy(ctx context.Context, query string, args ...any) ([]informer.Entry[string, V], informer.Revision, error) {
	for {
		m, err := s.resolveHead(ctx)
		if err != nil {
			return nil, 0, s.wrap("list", "", err)
		}
		var (
			entries []informer.Entry[string, V]
			again   bool
		)
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var compacted int64
			if err := tx.QueryRow(ctx, `SELECT compact_rev FROM `+quoteSchema(s.db.schema)+`.meta`).Scan(&compacted); err != nil {
				return err
			}
			if compacted > m { // compacted past m since: take m again
				again = true
				return nil
			}
			rows, err := tx.Query(ctx, query, append([]any{s.coll, m}, args...)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			// The values decode on other goroutines while rows arrive:
			// decoding on the reading goroutine made the read wait for it
			// (100k JSON values of ~550 B: ~0.6 s of a ~2 s initial sync)
			// while a core idled.
			dec := listdecode.New(ctx, s.decodeRev)
			for rows.Next() {
				var (
					key  string
					data []byte // a copy of the row's bytes (pgx): the decoders may keep it
					rev  int64
				)
				if err := rows.Scan(&key, &data, &rev); err != nil {
					_, _, _ = dec.Finish()
					return err
				}
				dec.Add(key, informer.Revision(rev), data)
			}
			if err := rows.Err(); err != nil {
				_, _, _ = dec.Finish()
				return err
			}
			entries, _, err = dec.Finish()
			return err
		})
		if err != nil {
			return nil, 0, s.wrap("list", "", err)
		}
		if !again {
			return entries, informer.Revision(m), nil
		}
	}
}

// Watch emits every change of the collection with a revision above after,
// in revision order, and bookmarks when other collections' changes move it
// on, until ctx is done, emit fails, the DB's reader fails (a dropped
// connection: the error), the DB is closed (ErrClosed), or the log no
// longer holds what follows after (compacted, or the store was reset or
// restored): then an error matching informer.ErrRevisionExpired. A value
// that does not decode is a Put with Err set to a *DecodeError and no
// Value; the Watch goes on.
//
// Watches share the DB's reader: one behind it catches up on queries of its
// own (bounded by what the reader resolved, so it fills nothing) and then
// joins it; one whose emit falls more than the DB's buffer behind leaves it
// and catches up again.
func (s *Store[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.check(ctx, s.coll, int64(after)); err != nil {
		return s.wrap("watch", "", err)
	}
	sb, err := s.db.subscribe(s.coll, int64(after))
	if err != nil {
		return s.wrap("watch", "", err)
	}
	defer s.db.unsubscribe(sb)
	emitted := int64(after)
	for {
		rows, pos, live, err := s.db.take(sb)
		if !live && err == nil && len(rows) == 0 {
			rows, pos, err = s.db.catchUp(ctx, sb)
		}
		for _, r := range rows {
			e := informer.Event[string, V]{Type: informer.Put, Key: r.key, Revision: informer.Revision(r.rev)}
			if r.op == 'd' {
				e.Type = informer.Delete
			} else {
				// A value that does not decode is this key's bad Put,
				// not the end of the Watch: a Watch resumed below it
				// would only meet it again, and every key behind it
				// would wait.
				e.Value, e.Err = s.decode(r.key, r.rev, r.value)
			}
			if s.db.trace != nil {
				s.db.trace.Emit(r.rev, time.Now())
			}
			if err := emit(e); err != nil {
				return err
			}
			emitted = r.rev
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return s.wrap("watch", "", err)
		}
		if pos > emitted {
			if err := emit(informer.Event[string, V]{Type: informer.Bookmark, Revision: informer.Revision(pos)}); err != nil {
				return err
			}
			emitted = pos
		}
		if !live {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sb.ready:
		}
	}
}

// Compact makes the log forget the history of every collection of the
// schema up to keep revisions before its newest resolved one, and returns
// the compaction revision. A Watch after an older revision then fails with
// informer.ErrRevisionExpired.
func (s *Store[V]) Compact(ctx context.Context, keep uint64) (informer.Revision, error) {
	m, err := s.resolveHead(ctx)
	if err != nil {
		return 0, s.wrap("compact", "", err)
	}
	c := m - int64(min(keep, uint64(m)))
	if _, err := s.pool.Exec(ctx, s.q.compact, c); err != nil {
		return 0, s.wrap("compact", "", err)
	}
	return informer.Revision(c), nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
