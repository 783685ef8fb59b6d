package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the PostgreSQL schema that holds the store's objects
// unless Setup and New are given another.
const DefaultSchema = "converge"

//go:embed schema.sql
var schemaSQL string

//go:embed follow.sql
var followSQL string

// Script returns the SQL that Setup runs for schema ("" is DefaultSchema):
// schema.sql, then follow.sql (the functions Follow calls), for programs
// whose role may not run DDL and apply it from a migration instead. Run it
// in one transaction.
func Script(schema string) string {
	return strings.ReplaceAll(schemaSQL+"\n"+followSQL, "{{.Schema}}", quoteSchema(schema))
}

// Setup creates the store's objects in schema ("" is DefaultSchema), or
// upgrades its functions in place, in one transaction. It is idempotent
// and safe when many processes call it at once: the transaction first
// takes an advisory lock on the schema's name, because concurrent CREATE …
// IF NOT EXISTS statements can fail on the catalog's unique indexes. No
// constructor calls it: call it once at start-up, or run Script from a
// migration. It needs the CREATE privilege on the database.
func Setup(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('converge-setup:' || $1))`, schema); err != nil {
			return err
		}
		// The simple protocol runs the whole script, several statements, at once.
		_, err := tx.Exec(ctx, Script(schema), pgx.QueryExecModeSimpleProtocol)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: setup schema %q: %w", schema, err)
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
