package sqlitestore

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/listdecode"
)

// watchPage bounds the changes one read of a Watch takes: a Watch far
// behind catches up in pages, each in its own read transaction, so that it
// never holds a snapshot (which keeps the WAL from being checkpointed)
// for long.
const watchPage = 1000

// List returns every key of the collection with its value and mod
// revision, and the store's revision, read in one transaction: one
// consistent snapshot, any later change has a higher revision. A value
// that does not decode is an Entry with Err set (a *DecodeError).
func (s *Store[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	if err := s.usable(ctx); err != nil {
		return nil, 0, err
	}
	for {
		h := s.db.highWater() // every revision up to h committed before the read
		entries, st, err := s.list(ctx)
		if err != nil {
			return nil, 0, err
		}
		if s.db.stale(st, h) {
			// Another store's file, or this one gone back in time: move
			// its revisions above every one handed out, and list again.
			if err := s.db.rebase(ctx, h); err != nil {
				return nil, 0, s.wrap("list", "", err)
			}
			continue
		}
		s.db.raise(st.seq)
		return entries, informer.Revision(st.seq), nil
	}
}

// list reads the collection and the store's state in one read
// transaction.
func (s *Store[V]) list(ctx context.Context) ([]informer.Entry[string, V], state, error) {
	tx, err := s.db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, state{}, s.wrap("list", "", err)
	}
	defer func() { _ = tx.Rollback() }()
	st, err := readState(ctx, tx)
	if err != nil {
		return nil, st, s.wrap("list", "", err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT h.key, h.rev, l.value FROM head h JOIN log l ON l.rev = h.rev WHERE h.coll = ?", s.coll)
	if err != nil {
		return nil, st, s.wrap("list", "", err)
	}
	defer func() { _ = rows.Close() }()
	// The values decode on other goroutines while rows arrive: decoding,
	// not reading, is most of a large List.
	dec := listdecode.New(ctx, s.decodeRev)
	for rows.Next() {
		var (
			key  string
			rev  int64
			data []byte // a copy (database/sql): the decoders may keep it
		)
		if err := rows.Scan(&key, &rev, &data); err != nil {
			_, _, _ = dec.Finish()
			return nil, st, s.wrap("list", "", err)
		}
		dec.Add(key, informer.Revision(rev), data)
	}
	if err := rows.Err(); err != nil {
		_, _, _ = dec.Finish()
		return nil, st, s.wrap("list", "", err)
	}
	entries, _, err := dec.Finish()
	if err != nil {
		return nil, st, s.wrap("list", "", err)
	}
	return entries, st, nil
}

// decodeRev is decode for a List's decoders.
func (s *Store[V]) decodeRev(key string, rev informer.Revision, data []byte) (V, error) {
	return s.decode(key, int64(rev), data)
}

// Watch calls emit for every change of the collection after revision
// after, in revision order, until ctx is done (ctx.Err()), emit fails (its
// error), the DB is closed (ErrClosed) or after is no longer available (an
// error wrapping informer.ErrRevisionExpired: compacted, or from before a
// rebase). A write of this DB's Stores wakes it at once; a write from
// outside within the DB's PollInterval. A value that does not decode is a
// Put with Err set (a *DecodeError). Deletes carry the zero V.
func (s *Store[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	pos := int64(after)
	var events []informer.Event[string, V]
	for {
		wake := s.db.changed() // before the read: a change after it closes wake
		var err error
		events, err = s.readAfter(ctx, pos, events[:0])
		if err != nil {
			return err
		}
		for _, e := range events {
			if err := emit(e); err != nil {
				return err
			}
		}
		if len(events) > 0 {
			pos = int64(events[len(events)-1].Revision)
			if len(events) == watchPage {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.db.closedCh:
			return fmt.Errorf("sqlitestore collection %q: watch: %w", s.coll, ErrClosed)
		case <-wake:
		}
	}
}

// readAfter reads a page of the collection's changes after pos, in one
// transaction that first checks that pos is still available.
func (s *Store[V]) readAfter(ctx context.Context, pos int64, events []informer.Event[string, V]) ([]informer.Event[string, V], error) {
	h := s.db.highWater() // every revision up to h committed before the read
	tx, err := s.db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.watchErr(ctx, err)
	}
	defer func() { _ = tx.Rollback() }()
	st, err := readState(ctx, tx)
	if err != nil {
		return nil, s.watchErr(ctx, err)
	}
	if s.db.stale(st, h) {
		_ = tx.Rollback()
		if err := s.db.rebase(ctx, h); err != nil {
			return nil, s.watchErr(ctx, err)
		}
		return nil, fmt.Errorf("sqlitestore collection %q: watch after %d: the file was replaced or went back in time: %w",
			s.coll, pos, informer.ErrRevisionExpired)
	}
	if pos < st.compacted || pos > st.seq {
		return nil, fmt.Errorf("sqlitestore collection %q: watch after %d: the store's history is from %d to %d: %w",
			s.coll, pos, st.compacted, st.seq, informer.ErrRevisionExpired)
	}
	rows, err := tx.QueryContext(ctx, "SELECT rev, key, op, value FROM log WHERE coll = ? AND rev > ? ORDER BY rev LIMIT ?", s.coll, pos, watchPage)
	if err != nil {
		return nil, s.watchErr(ctx, err)
	}
	defer func() { _ = rows.Close() }()
	var data []byte
	for rows.Next() {
		var (
			e    informer.Event[string, V]
			rev  int64
			code int
		)
		if err := rows.Scan(&rev, &e.Key, &code, &data); err != nil {
			return nil, s.watchErr(ctx, err)
		}
		e.Revision = informer.Revision(rev)
		if code == 2 {
			e.Type = informer.Delete
		} else {
			e.Type = informer.Put
			e.Value, e.Err = s.decode(e.Key, rev, data)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.watchErr(ctx, err)
	}
	return events, nil
}

// watchErr returns ctx's error if it is done (a read interrupted by it),
// ErrClosed if the DB was closed under the read, else err with context.
func (s *Store[V]) watchErr(ctx context.Context, err error) error {
	if uerr := s.usable(ctx); uerr != nil {
		return uerr
	}
	return fmt.Errorf("sqlitestore collection %q: watch: %w", s.coll, err)
}
