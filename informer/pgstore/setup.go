package pgstore

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the PostgreSQL schema that holds the store's objects
// unless Setup and New are given another.
const DefaultSchema = "converge"

//go:embed schema.sql
var schemaSQL string

//go:embed follow.sql
var followSQL string

// schemaVersion names the SQL of this version of the package: a digest of
// schema.sql and follow.sql. Setup records it in the schema's version
// table, and does nothing on a schema that holds it already.
var schemaVersion = func() string {
	sum := sha256.Sum256([]byte(schemaSQL + "\n" + followSQL))
	return hex.EncodeToString(sum[:16])
}()

// versionSQL records schemaVersion; it ends the script.
const versionSQL = `
-- The version of this SQL (a digest of it), which Setup checks first so
-- that on an up-to-date schema it takes no lock at all.
CREATE TABLE IF NOT EXISTS {{.Schema}}.version (
    id     int  PRIMARY KEY CHECK (id = 1),
    script text NOT NULL
);
INSERT INTO {{.Schema}}.version (id, script) VALUES (1, '{{.Version}}')
    ON CONFLICT (id) DO UPDATE SET script = excluded.script;
`

// Script returns the SQL that Setup runs for schema ("" is DefaultSchema):
// schema.sql, then follow.sql (the functions Follow calls), then the
// record of their version, for programs whose role may not run DDL and
// apply it from a migration instead. Run it in one transaction; Setup on a
// schema it made up to date then does nothing.
func Script(schema string) string {
	return strings.NewReplacer("{{.Schema}}", quoteSchema(schema), "{{.Version}}", schemaVersion).
		Replace(schemaSQL + "\n" + followSQL + versionSQL)
}

// Setup creates the store's objects in schema ("" is DefaultSchema), or
// upgrades them in place, in one transaction. It is idempotent and safe
// when many processes call it at once, also while others write: run it
// from every replica at start-up.
//
// On a schema that this version of the package set up already (its
// version table says so), Setup only reads that table: it takes no lock
// that a write, a Watch or another Setup waits for. Otherwise it takes an
// advisory lock on the schema's name (concurrent CREATE … IF NOT EXISTS
// statements can fail on the catalog's unique indexes), then the log and
// head tables in SHARE ROW EXCLUSIVE mode (the DDL's locks on them), which waits for the writes in
// flight and holds new ones off until it commits (readers go on), and
// then runs Script. A write can hold those tables in either order, so
// Setup waits for each at most a short while (100 ms, or half the
// server's deadlock_timeout if that is less), then lets the writes through
// and tries again: a write never fails because of Setup, and Setup never
// deadlocks. It returns ctx's error if ctx ends first; a session idle in a
// transaction that wrote the log delays it until that transaction ends.
//
// No constructor calls it: call it at start-up, or run Script from a
// migration. It needs the CREATE privilege on the database, unless the
// schema is up to date.
func Setup(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := checkSchema(schema); err != nil {
		return fmt.Errorf("pgstore: setup: %w", err)
	}
	if pool == nil {
		return errors.New("pgstore: setup: nil pool")
	}
	if upToDate(ctx, pool, schema) {
		return nil
	}
	for {
		err := setupOnce(ctx, pool, schema)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &pe) || pe.Code != "55P03": // lock_not_available
			return fmt.Errorf("pgstore: setup schema %q: %w", schema, err)
		}
		// Writes hold the log or head: let them through, then try again.
		if err := sleep(ctx, rebaseLockWait); err != nil {
			return fmt.Errorf("pgstore: setup schema %q: waiting for the writes in flight: %w", schema, err)
		}
	}
}

// upToDate reports whether schema's version table holds schemaVersion. It
// reads one row and locks nothing a writer takes; an error is a no. It
// looks the table up first, so that a missing one does not abort the
// transaction q may be.
func upToDate(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) bool {
	s := quoteSchema(schema)
	var exists, ok bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s+".version").Scan(&exists); err != nil || !exists {
		return false
	}
	err := q.QueryRow(ctx, `SELECT script = $1 FROM `+s+`.version WHERE id = 1`, schemaVersion).Scan(&ok)
	return err == nil && ok
}

// setupOnce is one try of Setup's slow path. Lock order: Setup's advisory
// lock (as Rebase and Follow), then log, then head, the order in which a
// write's cached plan locks them. A write's first parse locks head first,
// though, so the table locks wait at most lock_timeout, set below the
// server's deadlock_timeout: in a cycle with a write, Setup's wait ends
// first (55P03, and Setup tries again) and the write goes on.
func setupOnce(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	s := quoteSchema(schema)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('converge-setup:' || $1))`, schema); err != nil {
			return err
		}
		if upToDate(ctx, tx, schema) { // another process set it up meanwhile
			return nil
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', least($1::int,
			(SELECT setting::int / 2 FROM pg_settings WHERE name = 'deadlock_timeout'))::text || 'ms', true)`,
			rebaseLockWait.Milliseconds()); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
			s+".head", s+".log").Scan(&exists); err != nil {
			return err
		}
		if exists {
			if _, err := tx.Exec(ctx, `LOCK TABLE `+s+`.log, `+s+`.head IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return err
			}
		}
		// The simple protocol runs the whole script, several statements, at once.
		_, err := tx.Exec(ctx, Script(schema), pgx.QueryExecModeSimpleProtocol)
		return err
	})
}

// maxName is PostgreSQL's limit on a name, in bytes (NAMEDATALEN - 1).
const maxName = 63

// checkSchema returns an error for a schema name PostgreSQL would
// truncate: Setup would create the truncated name, and NOTIFY on the full
// one would fail ("channel name too long"), leaving other processes to
// their polls.
func checkSchema(schema string) error {
	if len(schema) > maxName {
		return fmt.Errorf("schema name %q is %d bytes; PostgreSQL names are at most %d", schema, len(schema), maxName)
	}
	return nil
}

// quoteSchema returns schema ("" is DefaultSchema) quoted as an identifier.
func quoteSchema(schema string) string {
	if schema == "" {
		schema = DefaultSchema
	}
	return pgx.Identifier{schema}.Sanitize()
}

// Rebase makes every revision the store handed out so far expire, keeping
// its contents: it moves the sequence to the current time in microseconds
// (never backwards), and the store's base and compaction revision with it,
// and gives the store a new id, in one transaction under Setup's lock. Every
// Watch after an older revision, live or resuming, then fails with
// informer.ErrRevisionExpired, and its informer relists.
//
// A restore from a backup (a dump, a point-in-time recovery, a failover to
// an asynchronous standby) can lose changes an informer has already seen
// and hand their revisions out again to other changes. A DB whose reader
// read such a change finds out by itself (the row it read last is gone or
// another; docs/design/pgstore.md, "Compaction, resets and restores") and
// calls Rebase. Call it yourself after a restore, before writers come back, to cover the rest:
// a revision kept from before the process started (a Watch resumed from a
// revision saved to disk; an informer lists afresh in a new process), and
// a replay that gives that last row's revision to a transaction with the
// same id writing the same key. A schema dropped and set up again needs no
// Rebase (Setup starts a fresh store above every old revision).
//
// Rebase waits for every write of the log still open (a transaction that
// took a revision of the old sequence must commit before the informers
// relist, or they would never see it): a session idle in a transaction
// after writing delays it until that transaction ends, retrying every
// 200 ms or so, and holds the schema's other writers off for up to 100 ms
// per try. It returns ctx's error if ctx ends first.
func Rebase(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	for {
		err := rebaseOnce(ctx, pool, schema)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case missing(err):
			return fmt.Errorf("pgstore: rebase schema %q: %w (call pgstore.Setup)", unquoted(schema), err)
		case !errors.As(err, &pe) || pe.Code != "55P03": // lock_not_available
			return fmt.Errorf("pgstore: rebase schema %q: %w", unquoted(schema), err)
		}
		// A transaction that wrote the log is still open: let the writers
		// held off behind the lock through, then try again.
		if err := sleep(ctx, rebaseLockWait); err != nil {
			return fmt.Errorf("pgstore: rebase schema %q: waiting for the open writes of the log: %w", unquoted(schema), err)
		}
	}
}

// rebaseLockWait is how long one try of Rebase waits for the writes open
// on the log, and then how long it lets the writers it held off through
// before the next try.
const rebaseLockWait = 100 * time.Millisecond

// rebaseOnce is one try of Rebase. It first locks the log against writes
// (SHARE: every write of the log, typed, fill, compaction or a followed
// table's trigger, holds ROW EXCLUSIVE from before it takes its revision
// until it ends). Otherwise a transaction that took a revision of the old
// sequence and commits after the rebase would land below the new
// compaction revision, after the informers relisted: no Watch and no List
// taken before it would hold it. Locking waits for such transactions to
// end (at most rebaseLockWait, then it fails with lock_not_available:
// while it waits, every new write of the schema waits behind it, and one
// session left idle in a transaction must not stall them all). Lock order:
// Setup's advisory lock, then the log, then meta's row, as Setup and the
// compaction statement (which locks log before meta's row); a writer that
// holds ROW EXCLUSIVE on the log waits for none of them.
func rebaseOnce(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	s := quoteSchema(schema)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('converge-setup:' || $1))`, unquoted(schema)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, rebaseLockWait.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+s+`.log IN SHARE MODE`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH b AS (
	SELECT setval('`+s+`.rev', greatest((extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
		(SELECT last_value + 1 FROM `+s+`.rev)), false) AS b)
UPDATE `+s+`.meta SET base = b.b, compact_rev = b.b - 1, store_id = gen_random_uuid() FROM b`)
		return err
	})
}

// unquoted returns schema, or DefaultSchema for "".
func unquoted(schema string) string {
	if schema == "" {
		return DefaultSchema
	}
	return schema
}
