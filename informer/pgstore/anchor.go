package pgstore

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/informer"
)

// An anchor is a log row this process's reader read, as it was: its
// revision, the transaction that wrote it, and what it changed. Every
// revision a DB hands out (an event's, a bookmark's, a List's) is a log
// row's or at most the compaction revision, and log rows are never changed
// nor deleted above the compaction revision. So if the row at an anchor's
// revision is later missing or another one while that revision is above the
// compaction revision, the store went back in time: it was restored from a
// backup (a dump, a point-in-time recovery, a snapshot, a failover to a
// standby that had not received it) and lost changes that informers have
// seen, whose revisions the sequence may hand out again to other changes.
// Nothing inside the database tells a restore apart (a dump brings back
// meta's store id; a physical backup the cluster's system identifier; only
// a recovery to a point in time or a promotion moves the timeline), but the
// process remembers what it read: see docs/design/pgstore.md, "Compaction, resets and restores".
//
// The zero anchor is none.
type anchor struct {
	rev, xid      int64  // xid: the row's xmin, the transaction that wrote it
	coll, key, op string // "" coll and key: a fill
}

// str returns s's value, or "" for NULL.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// probe is what the database holds now at an anchor's revision.
type probe struct {
	xid           *int64 // nil: no row there
	coll, key, op *string
}

// lost reports why the store no longer holds a (the sequence is behind it,
// or the row at a.rev is gone or another), or "" if it does, or if a is
// none or compacted (compaction may delete the row at exactly the
// compaction revision; a reset store's compaction revision is above every
// old one).
func (a anchor) lost(p probe, compacted, last int64) string {
	switch {
	case a.rev == 0 || a.rev <= compacted:
		return ""
	case a.rev > last:
		return fmt.Sprintf("the store's sequence (%d) is behind revision %d, which this process read", last, a.rev)
	case p.xid == nil:
		return fmt.Sprintf("the change at revision %d that this process read is gone", a.rev)
	case *p.xid != a.xid || str(p.coll) != a.coll || str(p.key) != a.key || str(p.op) != a.op:
		return fmt.Sprintf("revision %d holds another change than the one this process read", a.rev)
	}
	return ""
}

// anchorNow returns the DB's anchor.
func (db *DB) anchorNow() anchor {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.anchor
}

// setAnchor makes a the DB's anchor, unless a rebase cleared it since the
// reader of generation gen read a (whatever that reader read is from before).
func (db *DB) setAnchor(gen uint64, a anchor) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if gen == db.gen {
		db.anchor = a
	}
}

// wentBack handles a store that went back in time (why says how it shows):
// it rebases the store (Rebase: every revision handed out before expires, in
// every process, and the sequence moves past them, so they are never handed
// out again), forgets the DB's anchor, and returns the error that ends the
// Watch that found it, matching informer.ErrRevisionExpired. Two processes
// that find it at once rebase twice, which costs their informers one more
// relist.
//
// If the rebase fails, the anchor stays, so that the next Watch finds the
// same again and retries it.
func (db *DB) wentBack(ctx context.Context, why string) error {
	db.opts.logger.Warn("pgstore: the store went back in time (restored from a backup?); rebasing it, every informer relists",
		"schema", db.schema, "why", why)
	if err := Rebase(ctx, db.pool, db.schema); err != nil {
		return fmt.Errorf("pgstore schema %q: %s, and rebasing failed: %w", db.schema, why, err)
	}
	db.mu.Lock()
	db.anchor = anchor{}
	db.mu.Unlock()
	return fmt.Errorf("pgstore schema %q: %s (restored?); rebased: %w", db.schema, why, informer.ErrRevisionExpired)
}
