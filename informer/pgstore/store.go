package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
// keys) of the schema of a DB. Its Watches share the DB's reader with every
// other Store on the DB. It is safe for concurrent use.
type Store[V any] struct {
	db    *DB
	pool  *pgxpool.Pool
	coll  string
	opts  options[V]
	q     *queries
	fence *fenceQuery // nil: writes are not fenced (see Fenced)
}

// Compile-time proof that a Store is an informer.Store.
var _ informer.Store[string, struct{}] = (*Store[struct{}])(nil)

// New returns the Store of collection coll in db's schema. It does not
// touch the database; call Setup first. Any number of Stores, of any
// collections and value types, may share one DB (and should: one reader
// serves them all). It returns an error for a nil db, an empty coll or a
// nil option.
func New[V any](db *DB, coll string, opts ...Option[V]) (*Store[V], error) {
	return newStore("pgstore.New", db, coll, opts)
}

func newStore[V any](ctor string, db *DB, coll string, opts []Option[V]) (*Store[V], error) {
	if db == nil || coll == "" {
		return nil, fmt.Errorf("%s: want a DB and a collection name, got db %v and collection %q", ctor, db, coll)
	}
	s := &Store[V]{db: db, pool: db.pool, coll: coll, q: &db.q}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%s(%q): option %d is nil", ctor, coll, i)
		}
		o(&s.opts)
	}
	if s.opts.codec == nil {
		s.opts.codec = informer.JSON[V]{}
	}
	return s, nil
}

// Collection returns the collection the Store reads, writes and follows.
func (s *Store[V]) Collection() string { return s.coll }

// DecodeError says that a value of the collection does not decode with the
// Store's codec (a psql write of the wrong JSON, a followed table's column
// whose type changed). Get fails with it; List and Watch fail for no
// value: they return it as the Err of the key's Entry or Put, with the key
// and revision, and go on with every other key (see informer.Event.Err).
// Match it with errors.As.
type DecodeError struct {
	Collection string            // the Store's collection
	Key        string            // the key whose value did not decode
	Revision   informer.Revision // the value's revision
	Err        error             // the codec's error
}

// Error names the collection, key and revision, and the codec's error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("pgstore collection %q: the value of key %q at revision %d does not decode: %v",
		e.Collection, e.Key, e.Revision, e.Err)
}

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Get returns key's value and revision, or ok false and a nil error if key
// does not exist, with one statement, so it sees every write that returned
// before it.
func (s *Store[V]) Get(ctx context.Context, key string) (v V, rev informer.Revision, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, 0, false, err
	}
	var (
		r    int64
		data []byte
	)
	err = s.pool.QueryRow(ctx, s.q.get, s.coll, key).Scan(&r, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, 0, false, nil
	}
	if err != nil {
		return v, 0, false, s.wrap("get", key, err)
	}
	v, err = s.decode(key, r, data)
	if err != nil {
		return v, 0, false, fmt.Errorf("pgstore collection %q: get %q: %w", s.coll, key, err)
	}
	return v, informer.Revision(r), true, nil
}

// Create sets key to v only if key does not exist, and returns the write's
// revision; if it exists, an error wrapping informer.ErrConflict.
func (s *Store[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	return s.put(ctx, "create", 'c', key, v, 0)
}

// Update sets key to v only if its revision is still rev, and returns the
// write's revision; otherwise an error wrapping informer.ErrConflict. rev 0
// is a conflict without a round trip.
func (s *Store[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("pgstore collection %q: update %q at revision 0 (use Create): %w", s.coll, key, informer.ErrConflict)
	}
	return s.put(ctx, "update", 'u', key, v, rev)
}

func (s *Store[V]) put(ctx context.Context, op string, code byte, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	data, err := s.opts.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("pgstore collection %q: %s %q: encode: %w", s.coll, op, key, err)
	}
	return s.write(ctx, op, code, key, data, rev)
}

// Delete removes key. With rev 0 whatever its revision (0 and a nil error if
// it did not exist); with rev above 0 only if it is still at rev, otherwise
// an error wrapping informer.ErrConflict.
func (s *Store[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.write(ctx, "delete", 'd', key, nil, rev)
}

// write calls the schema's write function. A unique violation on the log's
// primary key means a reader's fill took the revision first: nothing was
// written, so it tries again.
func (s *Store[V]) write(ctx context.Context, op string, code byte, key string, data []byte, rev informer.Revision) (informer.Revision, error) {
	query, args := s.q.writeXid, []any{s.coll, key, string(rune(code)), int64(rev), data}
	if s.fence != nil {
		query, args = s.fence.write, append(args, s.fence.name, s.fence.term)
	}
	for {
		var (
			r   int64
			xid *int64 // nil: fenced writes do not return it
		)
		dest := []any{&r}
		if s.fence == nil {
			dest = append(dest, &xid)
		}
		err := s.pool.QueryRow(ctx, query, args...).Scan(dest...)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "log_pkey" {
			continue
		}
		if err != nil {
			return 0, s.wrap(op, key, err)
		}
		if r == fenced {
			return 0, fmt.Errorf("pgstore collection %q: %s %q: %s: %w", s.coll, op, key, s.fence, ErrFenced)
		}
		if r < 0 {
			return 0, fmt.Errorf("pgstore collection %q: %s %q at revision %d: %w", s.coll, op, key, rev, informer.ErrConflict)
		}
		switch {
		case r > 0 && xid != nil:
			// A log row's xmin is the 32-bit xid; this is the full one.
			s.db.committed(s.coll, key, code, data, r, *xid&(1<<32-1))
		case r > 0:
			s.db.wrote()
		}
		return informer.Revision(r), nil
	}
}

// wrap adds context to a database error, and the hint to call Setup if the
// schema's objects are missing.
func (s *Store[V]) wrap(op, key string, err error) error {
	if missing(err) {
		return fmt.Errorf("pgstore collection %q: %s %q: %w (call pgstore.Setup)", s.coll, op, key, err)
	}
	return fmt.Errorf("pgstore collection %q: %s %q: %w", s.coll, op, key, err)
}

// missing reports whether err says the schema's objects are missing: an
// undefined table, schema or function.
func missing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000" || pgErr.Code == "42883")
}
