package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/converge-go/converge/informer"
)

// row is one change of the log as the reader hands it to Watches, still
// encoded: each Watch decodes with its own Store's codec.
type row struct {
	rev   int64
	key   string
	op    byte // 'p' put, 'd' delete
	value []byte
}

// sub is one Watch's place in the DB. Guarded by DB.mu, except that pos of
// a sub that is not live is only written by its Watch's goroutine.
type sub struct {
	coll  string
	pos   int64 // every change of coll up to pos is in buf or was taken
	live  bool  // the reader appends to buf; otherwise the Watch catches up alone
	buf   []row
	err   error         // ends the Watch once buf is drained
	ready chan struct{} // cap 1: buf, pos or err changed
}

func (s *sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// subscribe adds a Watch of coll after a revision. It joins the shared
// stream if the reader is at or below after (a reader is started at after
// if none runs); otherwise it must catch up alone first.
func (db *DB) subscribe(coll string, after int64) (*sub, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, ErrClosed
	}
	s := &sub{coll: coll, pos: after, ready: make(chan struct{}, 1)}
	db.subs[s] = struct{}{}
	db.colls[coll]++
	if !db.running {
		db.startLocked(after)
	}
	s.live = after >= db.cursor
	return s, nil
}

// unsubscribe removes a Watch; the last one stops the reader.
func (db *DB) unsubscribe(s *sub) {
	db.mu.Lock()
	defer db.mu.Unlock()
	delete(db.subs, s)
	if db.colls[s.coll]--; db.colls[s.coll] == 0 {
		delete(db.colls, s.coll)
	}
	if len(db.subs) == 0 {
		db.stopLocked()
	}
}

// startLocked starts a reader (and its LISTEN connection and background
// compactor) at cursor.
func (db *DB) startLocked(cursor int64) {
	ctx, cancel := context.WithCancel(context.Background())
	db.gen++
	db.running, db.stop, db.cursor = true, cancel, cursor
	db.wg.Add(1)
	go db.run(ctx, db.gen, cursor)
	if !db.opts.pollOnly {
		db.wg.Add(1)
		go db.listen(ctx, db.gen)
	}
	if db.opts.compactEvery > 0 {
		db.wg.Add(1)
		go db.compactor(ctx)
	}
}

// stopLocked stops the running reader, if any. It does not wait for it:
// whatever it still publishes is dropped by the generation check.
func (db *DB) stopLocked() {
	if db.running {
		db.stop()
		db.running = false
		db.gen++
	}
}

// endLocked ends a Watch with err once it has drained its buffer.
func (db *DB) endLocked(s *sub, err error) {
	s.err, s.live = err, false
	s.signal()
}

// take hands a Watch what the reader published for it.
func (db *DB) take(s *sub) (rows []row, pos int64, live bool, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	rows, s.buf = s.buf, nil
	return rows, s.pos, s.live, s.err
}

// run is the reader: it polls the log after cursor, resolves holes, and
// publishes every change to the live Watches of its collection, until ctx
// is done or a query fails (then the live Watches end with the error). A
// commit of this process that follows cursor is handed off without a read
// (local.go).
func (db *DB) run(ctx context.Context, gen uint64, cursor int64) {
	defer db.wg.Done()
	// holeAt is the hole being waited for (the revision of the row after
	// it), seen first at holeSince.
	var holeAt int64
	var holeSince time.Time
	read := true // the next turn reads the log
	for {
		next, more, err := db.handOff(gen, cursor)
		if err != nil {
			return // stopped
		}
		cursor, read = next, read || more
		if !read {
			// Only local commits woke the reader and they are all passed:
			// nothing is known to be in the log after cursor.
			if read, err = db.idle(ctx, gen); err != nil {
				return
			}
			continue
		}
		db.mu.Lock()
		colls := make([]string, 0, len(db.colls))
		for c := range db.colls {
			colls = append(colls, c)
		}
		db.mu.Unlock()
		start := time.Now()
		rows, next, hole, full, err := db.read(ctx, gen, cursor, colls)
		if db.trace != nil && err == nil {
			db.trace.Query(start, time.Now(), cursor, next, hole)
		}
		if err == nil {
			err = db.publish(gen, rows, colls, next)
			cursor = next
		}
		switch {
		case err != nil:
		case hole > 0 && hole != holeAt:
			holeAt, holeSince = hole, time.Now()
			fallthrough
		case hole > 0 && time.Since(holeSince) < db.opts.fillAfter:
			// A writer that took a revision commits well within FillAfter:
			// give it that long before filling in front of it, but read
			// again as soon as a write commits (most likely the one the
			// hole is waiting for: with concurrent writers, holes are the
			// rule, and sleeping out FillAfter on each put the reader tens
			// of milliseconds behind). The read after it is due whatever
			// woke it: the log holds rows after the hole.
			_, err = db.waitWake(ctx, db.opts.fillAfter-time.Since(holeSince))
			read = true
		case hole > 0:
			// Waits for a writer still in flight, then fills what it left.
			err = db.fill(ctx, cursor+1, hole-1, holeSince)
			read = true
		case full:
			read = true
		default:
			read, err = db.idle(ctx, gen)
		}
		if err != nil {
			if ctx.Err() == nil {
				db.fail(gen, err)
			}
			return
		}
	}
}

// waitWake waits up to d for a wake-up: a local commit (local true), a
// NOTIFY or a (re)connect of the LISTEN connection, or the time (both
// false: the log must be read).
func (db *DB) waitWake(ctx context.Context, d time.Duration) (local bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-db.wake:
	case <-db.localWake:
		return true, nil
	case <-t.C:
	}
	return false, nil
}

// idle waits for a wake-up (a local commit, a NOTIFY, a (re)connect of the
// LISTEN connection) or the poll interval: the long one while LISTEN is up,
// the fast one without it. read says whether the log must be read: not
// after a local commit (handOff says whether it must).
func (db *DB) idle(ctx context.Context, gen uint64) (read bool, err error) {
	d := db.opts.fastPoll
	if db.listenGen.Load() == gen {
		d = db.opts.poll
	}
	local, err := db.waitWake(ctx, d)
	return !local, err
}

// publish appends rows to the buffers of the live Watches of their
// collections and moves every live Watch to next. A Watch whose buffer
// would overflow leaves the stream (it catches up alone), and so does one
// whose collection was not yet watched when the rows were read (their
// values were not fetched). It fails if the reader was stopped meanwhile.
func (db *DB) publish(gen uint64, rows map[string][]row, fetched []string, next int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if gen != db.gen {
		return context.Canceled
	}
	for s := range db.subs {
		if !s.live {
			continue
		}
		mine := rows[s.coll]
		i := 0
		for i < len(mine) && mine[i].rev <= s.pos {
			i++
		}
		mine = mine[i:]
		switch {
		case len(mine) > 0 && !slices.Contains(fetched, s.coll):
			s.live = false
			s.signal()
		case len(s.buf)+len(mine) > db.opts.buffer:
			s.live = false
			s.signal()
		case len(mine) > 0 || next > s.pos:
			s.buf = append(s.buf, mine...)
			s.pos = max(s.pos, next)
			s.signal()
		}
	}
	db.cursor = max(db.cursor, next)
	db.noteResolved(next)
	return nil
}

// fail ends the live Watches of reader gen with err and stops it. Watches
// catching up alone go on; the next to join starts a new reader.
func (db *DB) fail(gen uint64, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if gen != db.gen {
		return
	}
	for s := range db.subs {
		if s.live {
			db.endLocked(s, err)
		}
	}
	db.stopLocked()
}

// read reads the rows after cursor and returns the changes of the watched
// collections up to the first hole, by collection, the new cursor, the
// revision of the row after the hole (0: none), and whether the batch was
// full. It fails with ErrRevisionExpired if the log no longer holds what
// follows cursor, or if the store went back in time below the DB's anchor
// (which it rebases first, anchor.go). It makes the row at next the DB's
// anchor.
func (db *DB) read(ctx context.Context, gen uint64, cursor int64, colls []string) (out map[string][]row, next, hole int64, full bool, err error) {
	was := db.anchorNow()
	rows, err := db.pool.Query(ctx, db.q.read, cursor, colls, was.rev)
	if err != nil {
		return nil, cursor, 0, false, db.wrapErr("watch", err)
	}
	defer rows.Close()
	next, n := cursor, 0
	var last anchor          // the row at next
	var read map[int64]int64 // the writing transaction of every row passed
	for rows.Next() {
		var (
			compacted, base, seq int64
			p                    probe
			rev, xid             *int64
			coll, key, op        *string
			data                 []byte
		)
		if err := rows.Scan(&compacted, &base, &seq, &p.xid, &p.coll, &p.key, &p.op, &rev, &coll, &key, &op, &xid, &data); err != nil {
			return nil, cursor, 0, false, db.wrapErr("watch", err)
		}
		if n == 0 {
			if why := was.lost(p, compacted, seq); why != "" {
				rows.Close()
				return nil, cursor, 0, false, db.wentBack(ctx, why)
			}
			if err := expired("", cursor, compacted, base, seq); err != nil {
				return nil, cursor, 0, false, fmt.Errorf("pgstore schema %q: %w", db.schema, err)
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
		last = anchor{rev: *rev, xid: *xid, coll: str(coll), key: str(key), op: str(op)}
		if read == nil {
			read = make(map[int64]int64)
		}
		read[*rev] = *xid
		if coll == nil || *op == "f" {
			continue
		}
		if out == nil {
			out = make(map[string][]row)
		}
		out[*coll] = append(out[*coll], row{rev: *rev, key: *key, op: (*op)[0], value: data})
	}
	if err := rows.Err(); err != nil {
		return nil, cursor, 0, false, db.wrapErr("watch", err)
	}
	if last.rev != 0 {
		db.setAnchor(gen, last)
		db.mu.Lock()
		if gen == db.gen {
			db.lastRead = read
		}
		db.mu.Unlock()
	}
	return out, next, hole, n == db.opts.batch, nil
}

// readRange reads the changes of coll in (pos, bound], all resolved, for a
// Watch that catches up alone, one batch at a time; next is the revision
// up to which it read.
func (db *DB) readRange(ctx context.Context, coll string, pos, bound int64) (out []row, next int64, err error) {
	rows, err := db.pool.Query(ctx, db.q.catchUp, pos, bound, coll)
	if err != nil {
		return nil, pos, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			compacted, base, last int64
			rev                   *int64
			key, op               *string
			data                  []byte
		)
		if err := rows.Scan(&compacted, &base, &last, &rev, &key, &op, &data); err != nil {
			return nil, pos, err
		}
		if n == 0 {
			if err := expired(coll, pos, compacted, base, last); err != nil {
				return nil, pos, err
			}
		}
		if rev == nil {
			break
		}
		n++
		out = append(out, row{rev: *rev, key: *key, op: (*op)[0], value: data})
	}
	if err := rows.Err(); err != nil {
		return nil, pos, err
	}
	if n == db.opts.batch {
		return out, out[n-1].rev, nil
	}
	return out, bound, nil
}

// catchUp reads the next batch for a Watch that is behind the reader, or
// joins it to the shared stream (starting a reader at its position if none
// runs) and returns no rows.
func (db *DB) catchUp(ctx context.Context, s *sub) ([]row, int64, error) {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, s.pos, ErrClosed
	}
	if !db.running {
		db.startLocked(s.pos)
	}
	pos, bound := s.pos, db.cursor
	if pos >= bound {
		s.live = true
		db.mu.Unlock()
		return nil, pos, nil
	}
	db.mu.Unlock()
	rows, next, err := db.readRange(ctx, s.coll, pos, bound)
	if err != nil {
		return nil, pos, err
	}
	db.mu.Lock()
	s.pos = next
	db.mu.Unlock()
	return rows, next, nil
}

// check fails with ErrRevisionExpired if the log no longer holds every
// change after after, or never held them (the store was reset or
// restored). A store that went back in time below what this process read
// (anchor.go) is rebased first.
func (db *DB) check(ctx context.Context, coll string, after int64) error {
	was := db.anchorNow()
	var (
		compacted, base, last int64
		p                     probe
	)
	if err := db.pool.QueryRow(ctx, db.q.anchored, was.rev).Scan(&compacted, &base, &last, &p.xid, &p.coll, &p.key, &p.op); err != nil {
		return err
	}
	if why := was.lost(p, compacted, last); why != "" {
		return db.wentBack(ctx, why)
	}
	return expired(coll, after, compacted, base, last)
}

// expired returns an error matching informer.ErrRevisionExpired if the log
// no longer holds every change after cursor: compacted past it, or cursor
// is from another store (below this one's base) or beyond its sequence.
func expired(coll string, cursor, compacted, base, last int64) error {
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
	if coll != "" {
		return fmt.Errorf("collection %q: watch after revision %d: %s: %w", coll, cursor, why, informer.ErrRevisionExpired)
	}
	return fmt.Errorf("watch after revision %d: %s: %w", cursor, why, informer.ErrRevisionExpired)
}
