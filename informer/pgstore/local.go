package pgstore

import "time"

// The local hand-off: a typed write of this process returns its revision,
// the transaction that wrote it and (the Store has them) the key, op and
// value, which is everything the reader would read back from the log. When
// such a commit is the revision right after the reader's cursor, the reader
// publishes it without reading the log: no round trip, no second process
// on the critical path, on a machine where both wait for a core
// (docs/design/pgstore.md, "One reader per schema"). Nothing changes for holes: only the
// revision cursor+1 is handed off, and only a committed one, so a
// revision is still passed only as a change or a fill; anything else (a
// gap, another process's write, a fill) is left to the read.

// localRow is a commit of this process's Stores that the reader has not
// yet passed.
type localRow struct {
	coll string
	row  row
	xid  int64 // the writing transaction, as a log row's xmin (32 bits)
}

// committed records a commit of this process for the hand-off and wakes the
// reader. A commit it does not record is left to a read: one the reader
// passed already, one made while no reader runs (the next starts after it,
// or reads it), and one past the DB's buffer of unpassed commits (it wakes
// the reader to read the log, as its NOTIFY, which the reader ignores as
// its own, would have).
func (db *DB) committed(coll, key string, op byte, value []byte, rev, xid int64) {
	if db.trace != nil {
		db.trace.Wake(true, time.Now())
	}
	db.mu.Lock()
	full := db.running && rev > db.cursor && len(db.local) >= db.opts.buffer
	if db.running && rev > db.cursor && !full {
		if db.local == nil {
			db.local = make(map[int64]localRow)
		}
		if op != 'd' {
			op = 'p'
		}
		db.local[rev] = localRow{coll: coll, row: row{rev: rev, key: key, op: op, value: value}, xid: xid}
	}
	db.mu.Unlock()
	if full {
		db.kick()
	} else {
		select {
		case db.localWake <- struct{}{}:
		default:
		}
	}
	db.notifyOthers()
}

// handOff publishes the commits of this process that follow cursor without a
// gap, and returns the new cursor and whether the log must be read: a
// recorded commit at or below cursor that the last read did not pass as the
// same transaction's row (the store went back in time and handed its
// revision out again, or an older read passed it: the next read's anchor
// check tells which, before anything after it is handed off), or commits
// left behind a gap. It fails if the reader of gen was stopped.
func (db *DB) handOff(gen uint64, cursor int64) (next int64, read bool, err error) {
	db.mu.Lock()
	var rows map[string][]row
	var last localRow
	next = cursor
	for rev, r := range db.local {
		if rev <= cursor {
			delete(db.local, rev)
			if xid, ok := db.lastRead[rev]; !ok || xid != r.xid {
				read = true
			}
		}
	}
	if !read {
		for {
			r, ok := db.local[next+1]
			if !ok {
				break
			}
			delete(db.local, next+1)
			next, last = r.row.rev, r
			if rows == nil {
				rows = make(map[string][]row)
			}
			rows[r.coll] = append(rows[r.coll], r.row)
		}
		read = len(db.local) > 0
	}
	colls := make([]string, 0, len(db.colls))
	for c := range db.colls {
		colls = append(colls, c)
	}
	db.mu.Unlock()
	if next == cursor {
		return cursor, read, nil
	}
	// Every collection's value is at hand: fetched is every watched one.
	if err := db.publish(gen, rows, colls, next); err != nil {
		return cursor, read, err
	}
	db.setAnchor(gen, anchor{rev: last.row.rev, xid: last.xid, coll: last.coll, key: last.row.key, op: string(last.row.op)})
	return next, read, nil
}
