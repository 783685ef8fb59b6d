// Package pglock provides a leader.Lock stored as one row of a PostgreSQL
// table, updated by compare-and-swap on a version column.
//
// # Why a lease row and not an advisory lock
//
// pg_advisory_lock looks like a ready-made leader lock, but it belongs to a
// session: a client that is killed while its backend is busy keeps the lock
// for about 60 seconds (until TCP keepalive or client_connection_check_interval
// notices), nothing tells the holder that it lost the lock when its connection
// breaks, and a connection pooler in transaction mode hands the session to
// someone else. A lease row has none of these problems: every call is one
// self-contained statement, expiry is judged by the electors' own clocks (see
// package leader), and every acquisition writes a larger term that serves as
// a fencing token.
//
// # Table
//
// Each Lock is one row, keyed by its name, of a table (default
// "converge_leases", see WithTable) that several locks may share:
//
//	CREATE TABLE IF NOT EXISTS converge_leases (
//		name         text        PRIMARY KEY,
//		holder       text        NOT NULL,
//		term         bigint      NOT NULL,
//		lease_ms     bigint      NOT NULL,
//		acquire_time timestamptz NOT NULL,
//		renew_time   timestamptz NOT NULL,
//		version      bigint      NOT NULL
//	)
//
// The table is not created implicitly: call Lock.EnsureSchema once at start-up
// (it runs the statement above and is safe to run concurrently from many
// processes), or create the table yourself, for instance in a migration, when
// the application's role may not run DDL.
//
// Create inserts the row with version 1 (INSERT … ON CONFLICT DO NOTHING);
// Update runs UPDATE … SET …, version = version + 1 WHERE name = $1 AND
// version = $old, so exactly one of concurrent updates from the same read
// wins. Do not delete rows of running electors: a recreated row starts again
// at version 1. LeaseDuration is stored in whole milliseconds and times in
// microseconds, PostgreSQL's resolution.
//
// # Durability
//
// The elector needs every write the Lock acknowledged to survive a crash of
// the server. With synchronous_commit=off a crash loses the last commits:
// the row goes back to an older term and version, so the next acquisition
// hands out a term (and a version) that an elector already holds or saw,
// and a fenced write cannot tell the two holders apart. Keep
// synchronous_commit on (PostgreSQL's default) for the lock's sessions, for
// example in the pool's RuntimeParams if the server's default is off; with
// replicas, a failover to an asynchronous standby loses commits the same way.
//
// # Connection poolers
//
// The Lock keeps no session state: no advisory locks, no SET, no multi-
// statement transactions and, by default, no named prepared statements:
// every statement is sent with pgx.QueryExecModeExec (the extended protocol
// with the unnamed statement), whatever the pool's DefaultQueryExecMode. It
// therefore works through PgBouncer and similar poolers in transaction or
// statement mode. WithQueryExecMode(pgx.QueryExecModeSimpleProtocol) suits
// poolers that do not support the extended protocol at all.
//
// # Fencing a reconciler's writes
//
// The elector can only tell a deposed leader to stop; a write already sent
// may still land after a new leader was elected. A reconciler that must
// never be overwritten by an older term stores its term (leader.TermFromContext)
// next to the data and makes each write conditional on it, checking and
// writing in the same transaction, ideally the same statement:
//
//	BEGIN;
//	UPDATE widgets SET spec = $2, fence_term = $3
//	 WHERE id = $1 AND fence_term <= $3;
//	-- 0 rows: a newer term has written this row; roll back and stop.
//	COMMIT;
//
// The UPDATE locks the row, and under READ COMMITTED a concurrent writer
// waiting for that lock re-checks fence_term against the committed row, so a
// write of term n can never follow one of term n+1. For rows that a newer
// leader may not have touched yet, also read the lease row in the same
// transaction and give up unless it still holds the term:
//
//	SELECT term FROM converge_leases WHERE name = $1 FOR SHARE;
//
// which also holds off a takeover's UPDATE until the transaction ends. Neither
// check depends on clocks.
//
// When the reconciler's data is in informer/pgstore on the same database,
// pgstore.Fence does both checks for it: Store.Fenced makes each typed
// write one statement that reads the lease row FOR SHARE and writes only
// under the term, and Fence.Do runs any SQL in a transaction that does the
// same; a refused write returns pgstore.ErrFenced.
package pglock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/leader"
)

// DefaultTable is the table locks use unless WithTable says otherwise.
const DefaultTable = "converge_leases"

// Option configures a Lock.
type Option func(*Lock)

// WithTable stores the lock in table instead of DefaultTable. The name may
// be schema-qualified ("app.leases"); each part is quoted as an identifier,
// so it is taken literally (case included).
func WithTable(table string) Option {
	return func(l *Lock) { l.table = table }
}

// WithQueryExecMode sends every statement with mode instead of
// pgx.QueryExecModeExec. Use pgx.QueryExecModeSimpleProtocol for poolers that
// only speak the simple query protocol; modes that cache prepared statements
// need a session-pooled or direct connection.
func WithQueryExecMode(mode pgx.QueryExecMode) Option {
	return func(l *Lock) { l.mode = mode }
}

// Lock is a leader.Lock over one row of a PostgreSQL table. Create it with
// NewLock; it is safe for concurrent use. It does not own the pool.
type Lock struct {
	pool  *pgxpool.Pool
	name  string
	table string
	mode  pgx.QueryExecMode

	// Statements, built once from the quoted table name.
	createTable, get, insert, update string
}

var _ leader.Lock = (*Lock)(nil)

// NewLock returns the lock named name in pool's database. It does not touch
// the database; see EnsureSchema.
func NewLock(pool *pgxpool.Pool, name string, opts ...Option) *Lock {
	l := &Lock{pool: pool, name: name, table: DefaultTable, mode: pgx.QueryExecModeExec}
	for _, o := range opts {
		o(l)
	}
	t := pgx.Identifier(strings.Split(l.table, ".")).Sanitize()
	l.createTable = `CREATE TABLE IF NOT EXISTS ` + t + ` (
	name         text        PRIMARY KEY,
	holder       text        NOT NULL,
	term         bigint      NOT NULL,
	lease_ms     bigint      NOT NULL,
	acquire_time timestamptz NOT NULL,
	renew_time   timestamptz NOT NULL,
	version      bigint      NOT NULL
)`
	l.get = `SELECT ` + recordColumns + ` FROM ` + t + ` WHERE name = $1`
	l.insert = `INSERT INTO ` + t + ` (name, holder, term, lease_ms, acquire_time, renew_time, version)
VALUES ($1, $2, $3, $4, $5, $6, 1) ON CONFLICT (name) DO NOTHING RETURNING version`
	l.update = `UPDATE ` + t + ` SET holder = $3, term = $4, lease_ms = $5, acquire_time = $6, renew_time = $7, version = version + 1
WHERE name = $1 AND version = $2 RETURNING version`
	return l
}

// EnsureSchema creates the lock's table if it does not exist. It is
// idempotent and safe to call concurrently; it needs the CREATE privilege on
// the schema. It does not create the lock's row (Create does).
func (l *Lock) EnsureSchema(ctx context.Context) error {
	var err error
	for range 3 {
		_, err = l.pool.Exec(ctx, l.createTable, l.mode)
		// Two concurrent CREATE TABLE IF NOT EXISTS can both pass the
		// existence check; the loser fails on a catalog unique index: the
		// table's name (42P07), its row type's name (42710) or the index
		// itself (23505). Once the winner commits, the statement sees the
		// table and succeeds, so try again; a real clash (an unrelated type
		// of that name) fails every time and is reported.
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "42P07" && pgErr.Code != "42710") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%s: create table: %w", l.Describe(), err)
	}
	return nil
}

// Get returns the stored record, or leader.ErrNotFound if the row does not
// exist.
func (l *Lock) Get(ctx context.Context) (leader.Record, error) {
	r, err := scanRecord(l.pool.QueryRow(ctx, l.get, l.mode, l.name))
	if errors.Is(err, pgx.ErrNoRows) {
		return leader.Record{}, leader.ErrNotFound
	}
	if err != nil {
		return leader.Record{}, l.wrap("get", err)
	}
	return r, nil
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `holder, term, lease_ms, acquire_time, renew_time, version`

// scanRecord reads a row of recordColumns, preceded by the columns in
// before, if any.
func scanRecord(row pgx.Row, before ...any) (leader.Record, error) {
	var (
		r                  leader.Record
		term, leaseMS, ver int64
		acquired, renewed  time.Time
	)
	if err := row.Scan(append(before, &r.HolderIdentity, &term, &leaseMS, &acquired, &renewed, &ver)...); err != nil {
		return leader.Record{}, err
	}
	r.Term = leader.Term(term)
	r.LeaseDuration = time.Duration(leaseMS) * time.Millisecond
	r.AcquireTime, r.RenewTime = acquired.UTC(), renewed.UTC()
	r.Version = ver
	return r, nil
}

// Create inserts r with version 1 if the row does not exist and returns it as
// stored. If the row exists it writes nothing and returns an error wrapping
// leader.ErrConflict together with the record read right after (which may
// be newer than the one that blocked the insert, or zero if that read fails).
func (l *Lock) Create(ctx context.Context, r leader.Record) (leader.Record, error) {
	args, err := l.args(r)
	if err != nil {
		return leader.Record{}, err
	}
	var ver int64
	err = l.pool.QueryRow(ctx, l.insert, append([]any{l.mode, l.name}, args...)...).Scan(&ver)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, _ := l.Get(ctx)
		return cur, fmt.Errorf("%s: create: %w", l.Describe(), leader.ErrConflict)
	}
	if err != nil {
		return leader.Record{}, l.wrap("create", err)
	}
	r.Version = ver
	return l.stored(r), nil
}

// Update replaces the row with r if its version is old.Version and returns r
// as stored, with the incremented version. Otherwise, or if the row does not
// exist, it writes nothing and returns an error wrapping leader.ErrConflict.
func (l *Lock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	args, err := l.args(r)
	if err != nil {
		return leader.Record{}, err
	}
	var ver int64
	err = l.pool.QueryRow(ctx, l.update, append([]any{l.mode, l.name, old.Version}, args...)...).Scan(&ver)
	if errors.Is(err, pgx.ErrNoRows) {
		return leader.Record{}, fmt.Errorf("%s: update: %w", l.Describe(), leader.ErrConflict)
	}
	if err != nil {
		return leader.Record{}, l.wrap("update", err)
	}
	r.Version = ver
	return l.stored(r), nil
}

// Describe returns "postgres:TABLE/NAME".
func (l *Lock) Describe() string { return "postgres:" + l.table + "/" + l.name }

// args returns r's columns after name, in table order, as bound parameters.
func (l *Lock) args(r leader.Record) ([]any, error) {
	if r.Term > math.MaxInt64 {
		return nil, fmt.Errorf("%s: term %d does not fit a bigint", l.Describe(), r.Term)
	}
	return []any{r.HolderIdentity, int64(r.Term), r.LeaseDuration.Milliseconds(), r.AcquireTime, r.RenewTime}, nil
}

// stored returns r as Get would read it back: lease in whole milliseconds,
// times in microseconds and UTC.
func (l *Lock) stored(r leader.Record) leader.Record {
	r.LeaseDuration = r.LeaseDuration.Truncate(time.Millisecond)
	r.AcquireTime = r.AcquireTime.Truncate(time.Microsecond).UTC()
	r.RenewTime = r.RenewTime.Truncate(time.Microsecond).UTC()
	return r
}

func (l *Lock) wrap(op string, err error) error { return l.wrapAs(l.Describe(), op, err) }

// wrapAs is wrap for an operation that desc names, on l's table.
func (l *Lock) wrapAs(desc, op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return fmt.Errorf("%s: %s: table %s does not exist (call EnsureSchema): %w", desc, op, l.table, err)
	}
	return fmt.Errorf("%s: %s: %w", desc, op, err)
}
