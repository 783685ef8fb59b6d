//go:build linux

package candidates

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/pglock"
)

// Store is a lock, a fence and a log in a backend, made for one run of
// candidates, and a client of the backend to read the log with.
type Store struct {
	// Backend is "etcd" or "postgres".
	Backend string
	// Args are the candidates' flags for the store: -backend, the
	// backend's address (-endpoints or -dsn), -lock and -prefix.
	Args []string

	readLog func(ctx context.Context) ([]Entry, error)
	close   func(ctx context.Context) error
}

// ReadLog returns the fenced log, in the backend's commit order.
func (s *Store) ReadLog(ctx context.Context) ([]Entry, error) { return s.readLog(ctx) }

// Close removes the lock, the fence and the log from the backend and
// closes the client, reporting what it could not remove.
func (s *Store) Close(ctx context.Context) error { return s.close(ctx) }

// UniqueSuffix returns 8 random hexadecimal digits, to make the names of a
// run's lock, fence and log unique.
func UniqueSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewEtcdStore creates, in the etcd at endpoints, the fence at term 0
// under prefix (a fresh one: see UniqueSuffix); the lock is the key
// prefix/lock and the log the keys under prefix/log/. Close deletes every
// key under prefix/.
func NewEtcdStore(ctx context.Context, endpoints []string, prefix string) (*Store, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	fence := prefix + "/fence"
	_, err = cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(fence), "=", 0)).
		Then(clientv3.OpPut(fence, fmt.Sprintf("%020d", 0))).
		Commit()
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("create the fence %s: %w", fence, err)
	}
	return &Store{
		Backend: "etcd",
		Args:    []string{"-backend", "etcd", "-endpoints", strings.Join(endpoints, ","), "-lock", prefix + "/lock", "-prefix", prefix},
		readLog: func(ctx context.Context) ([]Entry, error) {
			resp, err := cli.Get(ctx, prefix+"/log/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
			if err != nil {
				return nil, err
			}
			var out []Entry
			for _, kv := range resp.Kvs {
				var e Entry
				if err := json.Unmarshal(kv.Value, &e); err != nil {
					return nil, fmt.Errorf("log entry %s: %w", kv.Key, err)
				}
				out = append(out, e)
			}
			return out, nil
		},
		close: func(ctx context.Context) error {
			_, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
			_ = cli.Close()
			return err
		},
	}, nil
}

// NewPostgresStore creates, in the PostgreSQL server at dsn, the tables
// prefix_fence (at term 0) and prefix_log (prefix a fresh name: see
// UniqueSuffix) and the table of package leader/pglock's locks, if
// missing; the lock is the one named lock. Close drops the fence and the
// log and deletes the lock's row.
func NewPostgresStore(ctx context.Context, dsn, prefix, lock string) (*Store, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	fence, logTable := pgx.Identifier{prefix + "_fence"}.Sanitize(), pgx.Identifier{prefix + "_log"}.Sanitize()
	for _, stmt := range []string{
		`CREATE TABLE ` + fence + ` (id int PRIMARY KEY, term bigint NOT NULL)`,
		`INSERT INTO ` + fence + ` VALUES (1, 0)`,
		`CREATE TABLE ` + logTable + ` (seq bigserial PRIMARY KEY, term bigint NOT NULL, identity text NOT NULL,
			start_ns bigint NOT NULL, end_ns bigint NOT NULL, late boolean NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if err := pglock.NewLock(pool, lock).EnsureSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{
		Backend: "postgres",
		Args:    []string{"-backend", "postgres", "-dsn", dsn, "-lock", lock, "-prefix", prefix},
		readLog: func(ctx context.Context) ([]Entry, error) {
			rows, err := pool.Query(ctx, `SELECT term, identity, start_ns, end_ns, late FROM `+logTable+` ORDER BY seq`)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
				var (
					e    Entry
					term int64
				)
				err := r.Scan(&term, &e.Identity, &e.Start, &e.End, &e.Late)
				e.Term = leader.Term(term)
				return e, err
			})
		},
		close: func(ctx context.Context) error {
			var errs []error
			for _, stmt := range []string{`DROP TABLE ` + fence, `DROP TABLE ` + logTable} {
				if _, err := pool.Exec(ctx, stmt); err != nil {
					errs = append(errs, err)
				}
			}
			if _, err := pool.Exec(ctx, `DELETE FROM `+pglock.DefaultTable+` WHERE name = $1`, lock); err != nil {
				errs = append(errs, err)
			}
			pool.Close()
			return errors.Join(errs...)
		},
	}, nil
}
