package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sqlitestore"
)

// stores are the two kinds of objects the example keeps, by name. The
// controllers see only informer.Store, so they run unchanged on the embedded
// memory store (memstore) and on etcd (etcdstore, which keeps the values as
// JSON under a prefix, where `etcdctl put` can change them).
type stores struct {
	replicaSets informer.Store[string, ReplicaSet]
	pods        informer.Store[string, Pod]
	// events are what the controllers recorded (events.go), for
	// describe; nil in tests that record none.
	events   informer.Store[string, events.Event]
	describe string
	close    func()
}

// openStores opens "memory" (the embedded store),
// "etcd://host:port[,host:port...]", with keys under prefix + "replicasets/"
// and prefix + "pods/", or a PostgreSQL connection URL
// ("postgres://user@host:port/db", see openPostgres), or a SQLite file
// ("sqlite://PATH", see openSQLite).
func openStores(url, prefix string) (*stores, error) {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return openPostgres(url, prefix)
	}
	if path, ok := strings.CutPrefix(url, "sqlite://"); ok {
		return openSQLite(url, path, prefix)
	}
	if url == "" || url == "memory" {
		rs, err1 := memstore.New[string, ReplicaSet]()
		pods, err2 := memstore.New[string, Pod]()
		evs, err3 := memstore.New[string, events.Event]()
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, err
		}
		return &stores{
			replicaSets: rs,
			pods:        pods,
			events:      evs,
			describe:    "the embedded memory store",
			close:       func() {},
		}, nil
	}
	hosts, ok := strings.CutPrefix(url, "etcd://")
	if !ok || hosts == "" {
		return nil, fmt.Errorf("--store %q: want memory, etcd://host:port, postgres://user@host:port/db or sqlite://PATH", url)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(hosts, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, prefix, clientv3.WithCountOnly(), clientv3.WithPrefix()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	rsPrefix, podPrefix := prefix+"replicasets/", prefix+"pods/"
	rs, err1 := etcdstore.New[ReplicaSet](cli, rsPrefix)
	pods, err2 := etcdstore.New[Pod](cli, podPrefix)
	evs, err3 := etcdstore.New[events.Event](cli, prefix+"events/")
	if err := errors.Join(err1, err2, err3); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	return &stores{
		replicaSets: rs,
		pods:        pods,
		events:      evs,
		describe:    fmt.Sprintf("etcd %s, keys under %s", hosts, prefix),
		close:       func() { _ = cli.Close() },
	}, nil
}

// openPostgres connects to the database at url, sets up (idempotently) the
// pgstore schema named after prefix (schemaName), and opens one pgstore.DB
// for both Stores, so that both informers share one reader and one LISTEN
// connection. The ReplicaSets are the collection "replicasets", keyed by
// name, their JSON in the schema's log; psql changes one live with the
// schema's patch function, which merges a JSON merge patch into the value,
// bumps its generation when the spec changed, and sends the NOTIFY that
// wakes the controllers, e.g. scaling web to 5 in schema converge_demo:
//
//	psql "$DSN" -c "SELECT converge_demo.patch('replicasets', 'web', '{\"spec\": {\"replicas\": 5}}')"
func openPostgres(url, prefix string) (*stores, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	schema := schemaName(prefix)
	if err := pgstore.Setup(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	db, err := pgstore.NewDB(pool, pgstore.WithSchema(schema))
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	rs, err1 := pgstore.New[ReplicaSet](db, "replicasets")
	pods, err2 := pgstore.New[Pod](db, "pods")
	evs, err3 := pgstore.New[events.Event](db, "events")
	if err := errors.Join(err1, err2, err3); err != nil {
		db.Close()
		pool.Close()
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	cfg := pool.Config().ConnConfig
	return &stores{
		replicaSets: rs,
		pods:        pods,
		events:      evs,
		describe:    fmt.Sprintf("PostgreSQL %s:%d/%s, schema %s", cfg.Host, cfg.Port, cfg.Database, schema),
		close:       func() { db.Close(); pool.Close() },
	}, nil
}

// openSQLite opens (creating it if absent) the SQLite file at path, one
// sqlitestore.DB for every Store, with the collections named after prefix
// (schemaName): "converge_demo.replicasets" and so on. The state survives
// a restart of the program; the sqlite3 command line changes it live
// through the file's objects view, seen within the poll interval (100 ms),
// e.g. deleting the ReplicaSet web:
//
//	sqlite3 state.db "DELETE FROM objects WHERE coll = 'converge_demo.replicasets' AND key = 'web'"
func openSQLite(url, path, prefix string) (*stores, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	name := schemaName(prefix)
	rs, err1 := sqlitestore.New[ReplicaSet](db, name+".replicasets")
	pods, err2 := sqlitestore.New[Pod](db, name+".pods")
	evs, err3 := sqlitestore.New[events.Event](db, name+".events")
	if err := errors.Join(err1, err2, err3); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("--store %q: %w", url, err)
	}
	return &stores{
		replicaSets: rs,
		pods:        pods,
		events:      evs,
		describe:    fmt.Sprintf("SQLite %s, collections %s.*", path, name),
		close:       func() { _ = db.Close() },
	}, nil
}

// schemaName turns a key prefix such as "/converge-demo/" into a schema
// name such as "converge_demo": lower case, every run of other characters
// than letters and digits an underscore, none at the ends, at most 63
// bytes (PostgreSQL's limit on names).
func schemaName(prefix string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(prefix) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if under && b.Len() > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
			under = false
		} else {
			under = true
		}
	}
	name := b.String()
	if name == "" {
		return pgstore.DefaultSchema
	}
	return name[:min(len(name), 63)]
}

// errDeleting is apply's answer for a ReplicaSet whose deletion was
// requested: its pods are on their way out, and so is it.
var errDeleting = errors.New("the replicaset is being deleted")

// apply sets a ReplicaSet's spec, creating it if needed; CreateOrUpdate
// bumps its generation when the spec changed (ReplicaSet is an
// object.SpecObject). The status and the finalizers are kept.
func apply(ctx context.Context, s informer.Store[string, ReplicaSet], name string, spec ReplicaSetSpec) error {
	_, _, err := informer.CreateOrUpdate(ctx, s, name, func(rs *ReplicaSet) error {
		switch {
		case rs.Deleting():
			return errDeleting
		case rs.Generation > 0 && sameJSON(rs.Spec, spec):
			return nil // nothing to write
		}
		rs.Spec = spec
		return nil
	})
	return err
}
