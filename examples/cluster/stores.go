package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/pglock"
)

// openedStores are the control plane's stores, where they are, and how to
// close them.
type openedStores struct {
	api.Stores
	describe string
	close    func()
	// lock is the leader lock of --lock, in the store's backend; nil
	// without --lock, or for a store that no other process shares.
	lock leader.Lock
}

// storeSchema names the cluster's collections: the etcd key prefix
// "/cluster/", the PostgreSQL schema and the SQLite collection prefix
// "cluster".
const storeSchema = "cluster"

// openStores opens the stores --store names: "mem" or "memory" (the
// embedded store, the default), "etcd://host:port[,host:port]" (keys under
// /cluster/<plural>/), "postgres://user@host:port/db" (schema cluster) or
// "sqlite://FILE" (collections cluster.<plural>).
//
// With a lock name, it also makes the lock of that name in the same
// backend, and fences the controllers' writes by its terms (termFenced).
func openStores(url, lock string) (*openedStores, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch {
	case url == "" || url == "mem" || url == "memory":
		st, err := api.NewMemoryStores()
		if err != nil {
			return nil, err
		}
		return &openedStores{Stores: st, describe: "the embedded memory store", close: func() {}}, nil
	case strings.HasPrefix(url, "etcd://"):
		hosts := strings.TrimPrefix(url, "etcd://")
		cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(hosts, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		if _, err := cli.Get(ctx, "/"+storeSchema+"/", clientv3.WithCountOnly(), clientv3.WithPrefix()); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		p := "/" + storeSchema + "/"
		var errs []error
		deps := etcdStore[api.Deployment](&errs, cli, p+"deployments/")
		rss := etcdStore[api.ReplicaSet](&errs, cli, p+"replicasets/")
		pods := etcdStore[api.Pod](&errs, cli, p+"pods/")
		nodes := etcdStore[api.Node](&errs, cli, p+"nodes/")
		leases := etcdStore[api.Lease](&errs, cli, p+"leases/")
		evs := etcdStore[events.Event](&errs, cli, p+"events/")
		if err := errors.Join(errs...); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		o := &openedStores{Stores: api.Stores{Deployments: deps, ReplicaSets: rss, Pods: pods, Nodes: nodes, Leases: leases, Events: evs},
			describe: "etcd " + hosts + ", keys under " + p, close: func() { _ = cli.Close() }}
		if lock != "" {
			fence := "/" + storeSchema + "-fences/" + lock
			o.Stores = api.Stores{Deployments: etcdFenced(deps, fence), ReplicaSets: etcdFenced(rss, fence), Pods: etcdFenced(pods, fence),
				Nodes: etcdFenced(nodes, fence), Leases: etcdFenced(leases, fence), Events: evs}
			o.lock = etcdlock.NewLock(cli, "/"+storeSchema+"-locks/"+lock)
		}
		return o, nil
	case strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://"):
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		if err := pgstore.Setup(ctx, pool, storeSchema); err != nil {
			pool.Close()
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		db, err := pgstore.NewDB(pool, pgstore.WithSchema(storeSchema))
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		var errs []error
		deps := pgStore[api.Deployment](&errs, db, "deployments")
		rss := pgStore[api.ReplicaSet](&errs, db, "replicasets")
		pods := pgStore[api.Pod](&errs, db, "pods")
		nodes := pgStore[api.Node](&errs, db, "nodes")
		leases := pgStore[api.Lease](&errs, db, "leases")
		evs := pgStore[events.Event](&errs, db, "events")
		if err := errors.Join(errs...); err != nil {
			db.Close()
			pool.Close()
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		o := &openedStores{Stores: api.Stores{Deployments: deps, ReplicaSets: rss, Pods: pods, Nodes: nodes, Leases: leases, Events: evs},
			describe: "PostgreSQL, schema " + storeSchema, close: func() { db.Close(); pool.Close() }}
		if lock != "" {
			l := pglock.NewLock(pool, lock)
			if err := l.EnsureSchema(ctx); err != nil {
				o.close()
				return nil, fmt.Errorf("--lock %q: %w", lock, err)
			}
			o.Stores = api.Stores{Deployments: pgFenced(deps, lock), ReplicaSets: pgFenced(rss, lock), Pods: pgFenced(pods, lock),
				Nodes: pgFenced(nodes, lock), Leases: pgFenced(leases, lock), Events: evs}
			o.lock = l
		}
		return o, nil
	case strings.HasPrefix(url, "sqlite://"):
		path := strings.TrimPrefix(url, "sqlite://")
		db, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
		if err != nil {
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		p := storeSchema + "."
		var errs []error
		st := api.Stores{
			Deployments: sqliteStore[api.Deployment](&errs, db, p+"deployments"),
			ReplicaSets: sqliteStore[api.ReplicaSet](&errs, db, p+"replicasets"),
			Pods:        sqliteStore[api.Pod](&errs, db, p+"pods"),
			Nodes:       sqliteStore[api.Node](&errs, db, p+"nodes"),
			Leases:      sqliteStore[api.Lease](&errs, db, p+"leases"),
			Events:      sqliteStore[events.Event](&errs, db, p+"events"),
		}
		if err := errors.Join(errs...); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("--store %q: %w", url, err)
		}
		return &openedStores{Stores: st, describe: "SQLite " + path, close: func() { _ = db.Close() }}, nil
	}
	return nil, fmt.Errorf("--store %q: want mem, etcd://host:port, postgres://user@host:port/db or sqlite://FILE", url)
}

// etcdStore, pgStore and sqliteStore make one collection of a backend,
// adding a constructor's error to errs, so that the six collections of a
// backend are made in six lines and checked once.
func etcdStore[V any](errs *[]error, cli *clientv3.Client, prefix string) *etcdstore.Store[V] {
	s, err := etcdstore.New[V](cli, prefix)
	*errs = append(*errs, err)
	return s
}

func pgStore[V any](errs *[]error, db *pgstore.DB, coll string) *pgstore.Store[V] {
	s, err := pgstore.New[V](db, coll)
	*errs = append(*errs, err)
	return s
}

func sqliteStore[V any](errs *[]error, db *sqlitestore.DB, coll string) *sqlitestore.Store[V] {
	s, err := sqlitestore.New[V](db, coll)
	*errs = append(*errs, err)
	return s
}
