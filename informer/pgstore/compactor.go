package pgstore

import (
	"context"
	"time"
)

// Defaults of the background compactor (WithCompaction). They are kine's and
// the Kubernetes API server's habit: every few minutes, keeping enough
// history that an informer that blinked (a dropped connection, a restart of
// its process) resumes its Watch instead of relisting.
const (
	// DefaultCompactInterval is how often a DB compacts the log while its
	// reader runs.
	DefaultCompactInterval = 5 * time.Minute
	// DefaultCompactKeep is how many revisions below the reader's resolved
	// cursor the background compactor keeps.
	DefaultCompactKeep = 10_000
	// compactStep is how many revisions one compaction statement covers at
	// most: a long DELETE holds its row locks and its snapshot for long
	// (kine compacts in steps for the same reason).
	compactStep = 10_000
)

// WithCompaction sets the background compactor of the DB: every interval,
// while the DB's reader runs (while at least one Watch does), it makes the
// log forget the history of every collection of the schema up to keep
// revisions below the newest revision this process has resolved, as
// Store.Compact does. A Watch after an older revision then fails with
// informer.ErrRevisionExpired and its informer relists. interval < 0 turns
// the compactor off (compact with Store.Compact, or from another process);
// interval 0 is DefaultCompactInterval. Default: on, DefaultCompactInterval,
// keep DefaultCompactKeep.
//
// What stays: every revision above the watermark (resolved − keep), and
// below it the newest value of every live key; never a revision above what
// this process resolved (a hole a slow writer still holds is never
// compacted over). It does not wait for this process's slowest Watch: keep
// is the protection, as in etcd; a Watch further behind relists. Every
// process with a watching DB compacts; the compaction revision only moves
// forward, so the most advanced process sets it.
func WithCompaction(interval time.Duration, keep uint64) DBOption {
	return func(o *dbOptions) {
		o.compactEvery, o.compactKeep, o.compactSet = interval, keep, true
	}
}

// compactor runs compactOnce every compaction interval until ctx is done
// (the reader of generation gen stopped). A failure is logged and tried
// again at the next tick: compaction is housekeeping, and a reader error
// ends the Watches on its own.
func (db *DB) compactor(ctx context.Context) {
	defer db.wg.Done()
	t := time.NewTicker(db.opts.compactEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c, err := db.compactOnce(ctx); err != nil && ctx.Err() == nil {
			db.opts.logger.Warn("pgstore: background compaction failed; trying again at the next interval",
				"schema", db.schema, "err", err)
		} else if err == nil && c > 0 {
			db.opts.logger.Debug("pgstore: compacted", "schema", db.schema, "revision", c)
		}
	}
}

// compactOnce compacts up to the watermark, resolved − keep, in steps of
// compactStep revisions, and returns the revision it compacted to (0: the
// log was already compacted that far).
func (db *DB) compactOnce(ctx context.Context) (int64, error) {
	resolved := db.resolved.Load()
	if resolved <= 0 {
		return 0, nil // nothing resolved yet: no watermark
	}
	target := resolved - int64(min(db.opts.compactKeep, uint64(resolved)))
	var compacted, base, last int64
	if err := db.pool.QueryRow(ctx, db.q.bounds).Scan(&compacted, &base, &last); err != nil {
		return 0, db.wrapErr("compact", err)
	}
	if target <= compacted || target > last {
		// Already that far, or the resolved revision is not this store's
		// (reset under a running reader): compact nothing.
		return 0, nil
	}
	for lo := compacted; lo < target; {
		hi := min(lo+compactStep, target)
		if _, err := db.pool.Exec(ctx, db.q.compact, hi); err != nil {
			return 0, db.wrapErr("compact", err)
		}
		lo = hi
	}
	return target, nil
}
