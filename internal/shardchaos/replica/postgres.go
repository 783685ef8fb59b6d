//go:build linux

package main

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/leader/pglock"
	"github.com/converge-go/converge/leader/shard"
)

// postgresStore keeps the run in tables named after root: the locks in
// root_leases (names "chaos/…"), a fence row per bucket in root_fence
// (bucket, epoch), the log in root_log (seq, entry); the test creates
// them.
type postgresStore struct {
	pool            *pgxpool.Pool
	root            string
	fence, logTable string
}

// idleInTransaction bounds how long a session may sit idle inside a
// transaction. append holds the bucket's fence row FOR SHARE until it
// commits: a replica paused (SIGSTOP) between its statements would keep
// the lock, and the bucket's next owner, whose claim UPDATEs that row,
// would wait for it as long as the pause lasts. With the timeout the
// server ends the paused transaction (its append is lost, which the fence
// would have refused anyway) and the new owner goes on.
const idleInTransaction = "1s"

func newPostgresStore(ctx context.Context, dsn, root string) (*postgresStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTransaction
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &postgresStore{pool: pool, root: root,
		fence: pgx.Identifier{root + "_fence"}.Sanitize(), logTable: pgx.Identifier{root + "_log"}.Sanitize()}, nil
}

func (s *postgresStore) locks() shard.Backend {
	return pglock.NewLocks(s.pool, pglock.WithTable(s.root+"_leases"))
}

func (s *postgresStore) close() { s.pool.Close() }

func (s *postgresStore) claim(ctx context.Context, b shard.Bucket) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.fence+` SET epoch = $2 WHERE bucket = $1 AND epoch <= $2`, b.ID, int64(b.Epoch))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// append checks the fence FOR SHARE and inserts in one transaction: a
// claim of a later epoch (an UPDATE of the row) waits for it to commit, so
// an accepted append always commits before the later epoch's claim.
func (s *postgresStore) append(ctx context.Context, b shard.Bucket, entry []byte) (bool, error) {
	ok := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var epoch int64
		if err := tx.QueryRow(ctx, `SELECT epoch FROM `+s.fence+` WHERE bucket = $1 FOR SHARE`, b.ID).Scan(&epoch); err != nil {
			return err
		}
		if epoch > int64(b.Epoch) {
			return nil
		}
		ok = true
		_, err := tx.Exec(ctx, `INSERT INTO `+s.logTable+` (entry) VALUES ($1)`, entry)
		return err
	})
	return ok && err == nil, err
}
