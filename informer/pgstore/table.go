package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/informer"
)

// FollowOption configures Follow.
type FollowOption func(*followOptions)

type followOptions struct {
	notify bool
}

// WithoutNotify makes the followed table's writes send no NOTIFY: the DBs
// of other processes then see them at their next poll (DefaultPollInterval
// while LISTEN is up) instead of at once. Use it for a table written many
// times a second, where NOTIFY's cost shows: PostgreSQL serialises the
// commits of notifying transactions (docs/design/pgstore.md, Alternatives measured). Default:
// one NOTIFY per statement that writes the table.
func WithoutNotify() FollowOption { return func(o *followOptions) { o.notify = false } }

// Follow makes collection coll of schema ("" is DefaultSchema) follow the
// user's table: afterwards every INSERT, UPDATE, DELETE and TRUNCATE of the
// table, by any client (psql, another application, a migration), is a
// change of coll that the Watches of a TableSource (or a Store) of coll
// emit. The table is named as in SQL ("widgets", "app.widgets",
// `"Mixed"`), resolved on the connection's search_path.
//
// Keys are the table's primary key: for one column its value as JSON text
// (a text column's characters, an integer's digits), for several the JSON
// array of their values as PostgreSQL prints jsonb (`[1, "a"]`). Values
// are the row as JSON (to_jsonb), decoded with the TableSource's codec:
// by default into V's fields named like the columns. An UPDATE that
// changes a row's primary key is two changes of one transaction: a delete
// of the old key, then a put of the new one at a higher revision (not
// necessarily the next: concurrent writers take revisions in between). A
// Watch emits both once the transaction commits, never one alone.
//
// Follow installs three triggers on the table (converge_follow,
// converge_follow_stmt, converge_follow_truncate; see follow.sql) and, the
// first time, copies the table's rows into the log, in one transaction
// that holds the table in SHARE ROW EXCLUSIVE mode (writers wait, readers
// do not), so that no write falls between the copy and the trigger. It is
// idempotent and safe when many processes call it at once: the transaction
// first takes Setup's advisory lock, and a table already followed by coll
// only gets its triggers replaced (an upgrade, or WithoutNotify changed),
// nothing copied. A table whose triggers were dropped meanwhile is copied
// anew: a put of every row, a delete of every key gone.
//
// It fails if the table has no primary key or a DEFERRABLE one (one
// statement could swap two keys, which a row trigger cannot log in an
// order that ends right), if the table or coll is followed already with
// another collection or table, or if another schema follows the table.
// Call Setup first. The caller's role needs TRIGGER on the table.
//
// Every write of the table then also commits synchronously (the trigger
// sets synchronous_commit on for its transaction, as typed writes do): a
// change a reader saw must not be lost in a crash and its revision handed
// out again. Its cost on a plain table is in docs/design/pgstore.md.
//
// A followed collection is the table's: write it with SQL on the table,
// never through a Store of coll, whose typed writes would go to the log
// only and leave the table behind (they are not refused: that would cost
// every typed write a lookup).
func Follow(ctx context.Context, pool *pgxpool.Pool, schema, table, coll string, opts ...FollowOption) error {
	o := followOptions{notify: true}
	for _, opt := range opts {
		opt(&o)
	}
	if schema == "" {
		schema = DefaultSchema
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('converge-setup:' || $1))`, schema); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT `+quoteSchema(schema)+`.follow($1::text::regclass, $2, $3)`, table, coll, o.notify)
		return err
	})
	if err != nil {
		return followErr("follow", schema, table, err)
	}
	return nil
}

// Unfollow removes schema's triggers from table ("" schema is
// DefaultSchema). The log keeps the collection as it was: its informers
// see no more changes until the table is followed again, which copies it
// anew. Unfollowing a table that is not followed does nothing.
func Unfollow(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('converge-setup:' || $1))`, schema); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT `+quoteSchema(schema)+`.unfollow($1::text::regclass)`, table)
		return err
	})
	if err != nil {
		return followErr("unfollow", schema, table, err)
	}
	return nil
}

func followErr(op, schema, table string, err error) error {
	if missing(err) {
		return fmt.Errorf("pgstore schema %q: %s table %q: %w (call pgstore.Setup)", schema, op, table, err)
	}
	return fmt.Errorf("pgstore schema %q: %s table %q: %w", schema, op, table, err)
}

// TableSource is the read-only informer.Source of a collection that
// follows a user's table (Follow): List and Watch as a Store's, with keys
// the table's primary key and values its rows decoded by the codec. Its
// Watches share the DB's reader with every Store and TableSource on it.
// Delete events carry no value (the zero V). Writes go to the table, by
// plain SQL; it is safe for concurrent use.
type TableSource[V any] struct {
	s *Store[V]
}

// Compile-time proof that a TableSource is an informer.Source.
var _ informer.Source[string, struct{}] = (*TableSource[struct{}])(nil)

// NewTable returns the Source of collection coll of db's schema, which
// Follow made follow a table. The codec (WithCodec) is given each row's
// JSON (to_jsonb of the row); default informer.JSON[V], which ignores
// columns V has no field for. It does not touch the database; until Follow
// has run, the collection is empty. It returns an error as New does.
func NewTable[V any](db *DB, coll string, opts ...Option[V]) (*TableSource[V], error) {
	s, err := newStore("pgstore.NewTable", db, coll, opts)
	if err != nil {
		return nil, err
	}
	return &TableSource[V]{s: s}, nil
}

// Collection returns the collection the TableSource reads.
func (t *TableSource[V]) Collection() string { return t.s.coll }

// List returns every row of the table as of a revision below which no
// hole remains (see Store.List). A row that does not decode (a column's
// type changed, say) is an entry with Err set to a *DecodeError; it fails
// nothing.
func (t *TableSource[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	return t.s.List(ctx)
}

// Watch emits every change of the table after revision after, in revision
// order (see Store.Watch): a Put for every inserted or updated row, a
// Delete for every deleted one, both for an UPDATE of the primary key. A
// row that does not decode is a Put with Err set to a *DecodeError; the
// Watch goes on.
func (t *TableSource[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	return t.s.Watch(ctx, after, emit)
}
