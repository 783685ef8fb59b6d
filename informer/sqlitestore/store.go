package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/converge-go/converge/informer"
)

// Option configures a Store.
type Option[V any] func(*options[V])

type options[V any] struct {
	codec informer.Codec[V]
}

// WithCodec sets how values are encoded and decoded. Default: informer.JSON[V].
func WithCodec[V any](c informer.Codec[V]) Option[V] { return func(o *options[V]) { o.codec = c } }

// Store is an informer.Store over one collection (a namespace of string
// keys) of a DB. Any number of Stores, of any collections and value types,
// share one DB. It is safe for concurrent use.
type Store[V any] struct {
	db   *DB
	coll string
	opts options[V]
}

// Compile-time proof that a Store is an informer.Store.
var _ informer.Store[string, struct{}] = (*Store[struct{}])(nil)

// New returns the Store of collection coll in db. It returns an error for a
// nil db, an empty coll or a nil option.
func New[V any](db *DB, coll string, opts ...Option[V]) (*Store[V], error) {
	if db == nil || coll == "" {
		return nil, fmt.Errorf("sqlitestore.New: want a DB and a collection name, got db %v and collection %q", db, coll)
	}
	s := &Store[V]{db: db, coll: coll}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("sqlitestore.New(%q): option %d is nil", coll, i)
		}
		o(&s.opts)
	}
	if s.opts.codec == nil {
		s.opts.codec = informer.JSON[V]{}
	}
	return s, nil
}

// Collection returns the collection the Store reads, writes and watches.
func (s *Store[V]) Collection() string { return s.coll }

// DB returns the DB the Store is on.
func (s *Store[V]) DB() *DB { return s.db }

// DecodeError says that a value of the collection does not decode with the
// Store's codec (a sqlite3 write of the wrong JSON, say). Get fails with
// it; List and Watch fail for no value: they return it as the Err of the
// key's Entry or Put, with the key and revision, and go on with every
// other key (see informer.Event.Err). Match it with errors.As.
type DecodeError struct {
	Collection string            // the Store's collection
	Key        string            // the key whose value did not decode
	Revision   informer.Revision // the value's revision
	Err        error             // the codec's error
}

// Error names the collection, key and revision, and the codec's error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("sqlitestore collection %q: the value of key %q at revision %d does not decode: %v",
		e.Collection, e.Key, e.Revision, e.Err)
}

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

func (s *Store[V]) decode(key string, rev int64, data []byte) (V, error) {
	v, err := s.opts.codec.Unmarshal(data)
	if err != nil {
		var zero V
		return zero, &DecodeError{Collection: s.coll, Key: key, Revision: informer.Revision(rev), Err: err}
	}
	return v, nil
}

// Get returns key's value and revision, or ok false and a nil error if key
// does not exist. It sees every write that returned before it was called,
// from any connection.
func (s *Store[V]) Get(ctx context.Context, key string) (v V, rev informer.Revision, ok bool, err error) {
	if err := s.usable(ctx); err != nil {
		return v, 0, false, err
	}
	var (
		r    int64
		data []byte
	)
	err = s.db.r.QueryRowContext(ctx,
		"SELECT h.rev, l.value FROM head h JOIN log l ON l.rev = h.rev WHERE h.coll = ? AND h.key = ?",
		s.coll, key).Scan(&r, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return v, 0, false, nil
	}
	if err != nil {
		return v, 0, false, s.wrap("get", key, err)
	}
	v, err = s.decode(key, r, data)
	if err != nil {
		return v, 0, false, s.wrap("get", key, err)
	}
	return v, informer.Revision(r), true, nil
}

// Create sets key to v only if key does not exist, and returns the write's
// revision; if it exists, an error wrapping informer.ErrConflict.
func (s *Store[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	return s.put(ctx, opCreate, key, v, 0)
}

// Update sets key to v only if its revision is still rev, and returns the
// write's revision; otherwise (also for rev 0 and an absent key) an error
// wrapping informer.ErrConflict.
func (s *Store[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("sqlitestore collection %q: update %q at revision 0 (use Create): %w", s.coll, key, informer.ErrConflict)
	}
	return s.put(ctx, opUpdate, key, v, rev)
}

// Delete removes key. With rev 0 whatever its revision (0 and a nil error if
// it did not exist); with rev above 0 only if it is still at rev, otherwise
// an error wrapping informer.ErrConflict.
func (s *Store[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	return s.write(ctx, opDelete, key, nil, rev)
}

type op string

const (
	opCreate op = "create"
	opUpdate op = "update"
	opDelete op = "delete"
)

func (s *Store[V]) put(ctx context.Context, o op, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	data, err := s.opts.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore collection %q: %s %q: encode: %w", s.coll, o, key, err)
	}
	return s.write(ctx, o, key, data, rev)
}

// errReused says that the file handed out a revision this DB had seen
// already: it went back in time (a restored backup).
var errReused = errors.New("revision reused")

// write runs one compare-and-swap in a BEGIN IMMEDIATE transaction on the
// writer connection: SQLite's single writer orders it with every other
// write, of this process or another, so the log has no holes.
func (s *Store[V]) write(ctx context.Context, o op, key string, data []byte, expect informer.Revision) (informer.Revision, error) {
	for {
		h := s.db.highWater()
		rev, err := s.tryWrite(ctx, o, key, data, int64(expect), h)
		if errors.Is(err, errReused) {
			if err := s.db.rebase(ctx, h); err != nil {
				return 0, s.wrap(string(o), key, err)
			}
			continue
		}
		if errors.Is(err, informer.ErrConflict) {
			return 0, fmt.Errorf("sqlitestore collection %q: %s %q at revision %d: %w", s.coll, o, key, expect, err)
		}
		if err != nil {
			return 0, s.wrap(string(o), key, err)
		}
		if rev > 0 {
			s.db.notify(rev)
		}
		return informer.Revision(rev), nil
	}
}

func (s *Store[V]) tryWrite(ctx context.Context, o op, key string, data []byte, expect, h int64) (int64, error) {
	tx, err := s.db.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var cur int64
	err = tx.QueryRowContext(ctx, "SELECT rev FROM head WHERE coll = ? AND key = ?", s.coll, key).Scan(&cur)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	switch {
	case o == opCreate && exists,
		o == opUpdate && (!exists || cur != expect),
		o == opDelete && expect != 0 && (!exists || cur != expect):
		return 0, informer.ErrConflict
	case o == opDelete && !exists:
		return 0, nil
	}
	code := 1
	if o == opDelete {
		code, data = 2, nil
	}
	var rev int64
	if err := tx.QueryRowContext(ctx, "INSERT INTO log (coll, key, op, value) VALUES (?, ?, ?, ?) RETURNING rev",
		s.coll, key, code, data).Scan(&rev); err != nil {
		return 0, err
	}
	if rev <= h {
		return 0, errReused
	}
	switch o {
	case opCreate:
		_, err = tx.ExecContext(ctx, "INSERT INTO head (coll, key, rev) VALUES (?, ?, ?)", s.coll, key, rev)
	case opUpdate:
		_, err = tx.ExecContext(ctx, "UPDATE head SET rev = ? WHERE coll = ? AND key = ?", rev, s.coll, key)
	case opDelete:
		_, err = tx.ExecContext(ctx, "DELETE FROM head WHERE coll = ? AND key = ?", s.coll, key)
	}
	if err != nil {
		return 0, err
	}
	return rev, tx.Commit()
}

// usable returns ctx's error, or ErrClosed if the DB is closed.
func (s *Store[V]) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.db.mu.Lock()
	closed := s.db.closed
	s.db.mu.Unlock()
	if closed {
		return fmt.Errorf("sqlitestore collection %q: %w", s.coll, ErrClosed)
	}
	return nil
}

// wrap adds context to a database error.
func (s *Store[V]) wrap(o, key string, err error) error {
	return fmt.Errorf("sqlitestore collection %q: %s %q: %w", s.coll, o, key, err)
}
