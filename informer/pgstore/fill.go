package pgstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// holeWarnAfter is how long (in nanoseconds) a hole may stay before the
// reader logs a warning: a second, but in tests.
var holeWarnAfter atomic.Int64

func init() { holeWarnAfter.Store(int64(time.Second)) }

// fill waits for the writers still in flight in [lo, hi], then fills what
// they left (aborted or skipped revisions). The wait has no end of its own:
// a session left idle in a transaction after writing the log stalls every
// Watch of the schema until it ends. So if the hole, first seen at since,
// stays longer than holeWarnAfter, fill logs a warning naming the sessions
// it waits for (pg_blocking_pids), once, and when it ends, how long it took.
func (db *DB) fill(ctx context.Context, lo, hi int64, since time.Time) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	done := make(chan struct{})
	warned := make(chan bool, 1)
	go func() { warned <- db.warnHole(ctx, done, conn.Conn().PgConn().PID(), lo, hi, since) }()
	_, err = conn.Exec(ctx, db.q.fill, lo, hi)
	close(done)
	if <-warned && err == nil {
		db.opts.logger.Info("pgstore: the open transaction ended; Watches go on",
			"schema", db.schema, "revision", lo, "stalled", time.Since(since).Round(time.Millisecond))
	}
	return err
}

// warnHole logs the warning of fill, whose session is pid, if done is not
// closed within holeWarnAfter of since, and reports whether it did.
func (db *DB) warnHole(ctx context.Context, done <-chan struct{}, pid uint32, lo, hi int64, since time.Time) bool {
	t := time.NewTimer(time.Duration(holeWarnAfter.Load()) - time.Since(since))
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	// The fill may not wait on its lock yet: ask again briefly until it does.
	var sessions []string
	for try := 0; len(sessions) == 0 && try < 100; try++ {
		if try > 0 && sleep(ctx, 10*time.Millisecond) != nil {
			return false
		}
		select {
		case <-done:
			return false
		default:
		}
		sessions = db.blockers(ctx, pid)
	}
	db.opts.logger.Warn("pgstore: a transaction that wrote the log is still open; every Watch of the schema waits for it "+
		"(end it, or set idle_in_transaction_session_timeout)",
		"schema", db.schema, "revision", lo, "through", hi, "open_for", time.Since(since).Round(time.Millisecond),
		"sessions", sessions)
	return true
}

// blockers describes the sessions that the session pid waits for.
func (db *DB) blockers(ctx context.Context, pid uint32) []string {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rows, err := db.pool.Query(qctx, `SELECT format('pid %s (%s, %s, %s for %s): %s', pid, usename,
		application_name, state, date_trunc('second', now() - xact_start), left(query, 200))
	FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1)) ORDER BY pid`, pid)
	var sessions []string
	if err == nil {
		sessions, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return []string{"unknown: " + err.Error()}
	}
	return sessions
}
