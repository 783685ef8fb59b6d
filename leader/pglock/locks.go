package pglock

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/leader"
)

// Locks is a set of locks in one table, for leader/shard: the lock called
// name is the row of that name, and List reads the rows whose names start
// with a prefix in one statement, a consistent snapshot. Create it with
// NewLocks; it is safe for concurrent use and does not own the pool.
type Locks struct {
	pool *pgxpool.Pool
	opts []Option
	// proto is a lock with the set's options, for its table, statement
	// mode and EnsureSchema.
	proto *Lock
	list  string
	// del deletes a row at a version and counts the row left of that
	// name (0: deleted or absent), in one statement.
	del string
}

// NewLocks returns the set of locks in pool's database with opts
// (WithTable, WithQueryExecMode) applied to every lock. It does not touch
// the database; see EnsureSchema.
func NewLocks(pool *pgxpool.Pool, opts ...Option) *Locks {
	proto := NewLock(pool, "", opts...)
	t := pgx.Identifier(strings.Split(proto.table, ".")).Sanitize()
	return &Locks{
		pool: pool, opts: opts, proto: proto,
		// starts_with takes the prefix literally, where LIKE would need
		// its % and _ escaped.
		list: `SELECT name, ` + recordColumns + ` FROM ` + t + ` WHERE starts_with(name, $1)`,
		del: `WITH d AS (DELETE FROM ` + t + ` WHERE name = $1 AND version = $2 RETURNING name)
SELECT count(*) FROM ` + t + ` WHERE name = $1 AND NOT EXISTS (SELECT FROM d)`,
	}
}

// EnsureSchema creates the table if it does not exist, as
// Lock.EnsureSchema.
func (s *Locks) EnsureSchema(ctx context.Context) error { return s.proto.EnsureSchema(ctx) }

// Lock returns the lock stored in the row called name.
func (s *Locks) Lock(name string) leader.Lock { return NewLock(s.pool, name, s.opts...) }

// List returns the record of every row whose name starts with prefix, by
// name, read by one statement.
func (s *Locks) List(ctx context.Context, prefix string) (map[string]leader.Record, error) {
	desc := "postgres:" + s.proto.table + "/" + prefix + "*"
	rows, err := s.pool.Query(ctx, s.list, s.proto.mode, prefix)
	if err != nil {
		return nil, s.proto.wrapAs(desc, "list", err)
	}
	defer rows.Close()
	out := make(map[string]leader.Record)
	for rows.Next() {
		var name string
		r, err := scanRecord(rows, &name)
		if err != nil {
			return nil, fmt.Errorf("%s: list: %w", desc, err)
		}
		out[name] = r
	}
	if err := rows.Err(); err != nil {
		return nil, s.proto.wrapAs(desc, "list", err)
	}
	return out, nil
}
