package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/converge-go/converge/informer"
)

// queries are the statements of a Store, built once from the quoted schema.
type queries struct {
	get, write, head, gaps, fill, list, poll, compact string
}

func newQueries(s string) queries {
	return queries{
		get:   `SELECT l.rev, l.value FROM ` + s + `.head h JOIN ` + s + `.log l ON l.rev = h.rev WHERE h.coll = $1 AND h.key = $2`,
		write: `SELECT ` + s + `.write($1, $2, $3::"char", $4, $5)`,
		// The revision a List is at: every change committed before it, and
		// never below the compaction revision (an empty log).
		head: `SELECT greatest((SELECT max(rev) FROM ` + s + `.log), compact_rev), compact_rev FROM ` + s + `.meta`,
		// The holes between $1 (resolved) and $2 (a log row's revision).
		gaps: `SELECT r + 1, n - 1 FROM (SELECT r, lead(r) OVER (ORDER BY r) AS n FROM
	(SELECT $1::bigint AS r UNION ALL SELECT rev FROM ` + s + `.log WHERE rev > $1 AND rev <= $2) x) y WHERE n > r + 1`,
		// ON CONFLICT DO NOTHING waits for an in-flight writer of the same
		// revision, then yields to its row or, if it aborted, fills.
		fill: `INSERT INTO ` + s + `.log (rev, op) SELECT g, 'f' FROM generate_series($1::bigint, $2::bigint) g ON CONFLICT (rev) DO NOTHING`,
		list: `SELECT key, value, rev FROM (SELECT DISTINCT ON (key) key, op, value, rev FROM ` + s + `.log
	WHERE coll = $1 AND rev <= $2 ORDER BY key, rev DESC) x WHERE op = 'p'`,
		// One snapshot: the expiry bounds and the next rows.
		poll: `SELECT m.compact_rev, m.base, q.last_value, l.rev, l.coll = $2, l.key, l.op, l.value
	FROM ` + s + `.meta m CROSS JOIN ` + s + `.rev q
	LEFT JOIN LATERAL (SELECT * FROM ` + s + `.log WHERE rev > $1 ORDER BY rev LIMIT $3) l ON true ORDER BY l.rev`,
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
			if err := sleep(ctx, s.opts.fillAfter); err != nil {
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
	lo := max(compacted, s.resolved.Load())
	if lo >= m {
		return m, nil
	}
	if err := s.resolve(ctx, lo, m); err != nil {
		return 0, err
	}
	for {
		old := s.resolved.Load()
		if old >= m || s.resolved.CompareAndSwap(old, m) {
			return m, nil
		}
	}
}

// List returns every live key of the collection at a revision M below
// which no hole remains: M is the newest change committed before List
// began, holes below it are resolved (waiting for slow writers), and the
// keys are read in one snapshot that still holds every change up to M.
func (s *Store[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
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
			if err := tx.QueryRow(ctx, `SELECT compact_rev FROM `+quoteSchema(s.opts.schema)+`.meta`).Scan(&compacted); err != nil {
				return err
			}
			if compacted > m { // compacted past m since: take m again
				again = true
				return nil
			}
			rows, err := tx.Query(ctx, s.q.list, s.coll, m)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var (
					key  string
					data []byte
					rev  int64
				)
				if err := rows.Scan(&key, &data, &rev); err != nil {
					return err
				}
				v, err := s.opts.codec.Unmarshal(data)
				if err != nil {
					return &DecodeError{Collection: s.coll, Key: key, Revision: informer.Revision(rev), Err: err}
				}
				entries = append(entries, informer.Entry[string, V]{Key: key, Value: v})
			}
			return rows.Err()
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
// on, until ctx is done, emit fails, or the log no longer holds what
// follows after (compacted, or the store was reset): then an error
// matching informer.ErrRevisionExpired.
func (s *Store[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	cursor, emitted := int64(after), int64(after)
	var holeAt int64 // the hole waited for once already
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		evs, next, hole, full, err := s.poll(ctx, cursor)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := emit(e); err != nil {
				return err
			}
			emitted = int64(e.Revision)
		}
		cursor = next
		switch {
		case hole > 0 && hole != holeAt:
			holeAt = hole
			err = sleep(ctx, s.opts.fillAfter)
		case hole > 0:
			_, err = s.pool.Exec(ctx, s.q.fill, cursor+1, hole-1)
			if err != nil {
				err = s.wrap("watch: fill", "", err)
			}
		case full:
		default:
			if cursor > emitted {
				if err := emit(informer.Event[string, V]{Type: informer.Bookmark, Revision: informer.Revision(cursor)}); err != nil {
					return err
				}
				emitted = cursor
			}
			err = sleep(ctx, s.opts.poll)
		}
		if err != nil {
			return err
		}
	}
}

// poll reads the rows after cursor and returns the events of the
// collection up to the first hole, the new cursor, the revision of the row
// after the hole (0: none), and whether the batch was full.
func (s *Store[V]) poll(ctx context.Context, cursor int64) (evs []informer.Event[string, V], next, hole int64, full bool, err error) {
	rows, err := s.pool.Query(ctx, s.q.poll, cursor, s.coll, s.opts.batch)
	if err != nil {
		return nil, cursor, 0, false, s.wrap("watch", "", err)
	}
	defer rows.Close()
	next, n := cursor, 0
	for rows.Next() {
		var (
			compacted, base, last int64
			rev                   *int64
			mine                  *bool
			key                   *string
			op                    *string
			data                  []byte
		)
		if err := rows.Scan(&compacted, &base, &last, &rev, &mine, &key, &op, &data); err != nil {
			return nil, cursor, 0, false, s.wrap("watch", "", err)
		}
		if n == 0 {
			if err := s.expired(cursor, compacted, base, last); err != nil {
				return nil, cursor, 0, false, err
			}
		}
		if rev == nil {
			break
		}
		n++
		if hole != 0 {
			continue
		}
		if *rev != next+1 {
			hole = *rev
			continue
		}
		next = *rev
		if mine == nil || !*mine || *op == "f" {
			continue
		}
		e := informer.Event[string, V]{Type: informer.Put, Key: *key, Revision: informer.Revision(*rev)}
		if *op == "d" {
			e.Type = informer.Delete
		} else if e.Value, err = s.opts.codec.Unmarshal(data); err != nil {
			return nil, cursor, 0, false, &DecodeError{Collection: s.coll, Key: *key, Revision: e.Revision, Err: err}
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, cursor, 0, false, s.wrap("watch", "", err)
	}
	return evs, next, hole, n == s.opts.batch, nil
}

// expired returns an error matching informer.ErrRevisionExpired if the log
// no longer holds every change after cursor: compacted past it, or cursor
// is from another store (below this one's base) or beyond its sequence.
func (s *Store[V]) expired(cursor, compacted, base, last int64) error {
	var why string
	switch {
	case cursor < compacted:
		why = fmt.Sprintf("compacted up to %d", compacted)
	case cursor < base-1:
		why = fmt.Sprintf("the store starts at revision %d (reset or restored)", base)
	case cursor > last:
		why = fmt.Sprintf("the store is at revision %d (reset or restored)", last)
	default:
		return nil
	}
	return fmt.Errorf("pgstore collection %q: watch after revision %d: %s: %w", s.coll, cursor, why, informer.ErrRevisionExpired)
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
