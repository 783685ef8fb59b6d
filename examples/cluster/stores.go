package main

import (
	"context"
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
		st := api.NewMemoryStores()
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
		deps := etcdstore.New[api.Deployment](cli, p+"deployments/")
		rss := etcdstore.New[api.ReplicaSet](cli, p+"replicasets/")
		pods := etcdstore.New[api.Pod](cli, p+"pods/")
		nodes := etcdstore.New[api.Node](cli, p+"nodes/")
		leases := etcdstore.New[api.Lease](cli, p+"leases/")
		evs := etcdstore.New[events.Event](cli, p+"events/")
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
		db := pgstore.NewDB(pool, pgstore.WithSchema(storeSchema))
		deps := pgstore.New[api.Deployment](db, "deployments")
		rss := pgstore.New[api.ReplicaSet](db, "replicasets")
		pods := pgstore.New[api.Pod](db, "pods")
		nodes := pgstore.New[api.Node](db, "nodes")
		leases := pgstore.New[api.Lease](db, "leases")
		evs := pgstore.New[events.Event](db, "events")
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
		st := api.Stores{
			Deployments: sqlitestore.New[api.Deployment](db, p+"deployments"),
			ReplicaSets: sqlitestore.New[api.ReplicaSet](db, p+"replicasets"),
			Pods:        sqlitestore.New[api.Pod](db, p+"pods"),
			Nodes:       sqlitestore.New[api.Node](db, p+"nodes"),
			Leases:      sqlitestore.New[api.Lease](db, p+"leases"),
			Events:      sqlitestore.New[events.Event](db, p+"events"),
		}
		return &openedStores{Stores: st, describe: "SQLite " + path, close: func() { _ = db.Close() }}, nil
	}
	return nil, fmt.Errorf("--store %q: want mem, etcd://host:port, postgres://user@host:port/db or sqlite://FILE", url)
}
