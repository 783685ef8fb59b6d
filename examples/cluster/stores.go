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
)

// openedStores are the control plane's stores, where they are, and how to
// close them.
type openedStores struct {
	api.Stores
	describe string
	close    func()
}

// storeSchema names the cluster's collections: the etcd key prefix
// "/cluster/", the PostgreSQL schema and the SQLite collection prefix
// "cluster".
const storeSchema = "cluster"

// openStores opens the stores --store names: "mem" or "memory" (the
// embedded store, the default), "etcd://host:port[,host:port]" (keys under
// /cluster/<plural>/), "postgres://user@host:port/db" (schema cluster) or
// "sqlite://FILE" (collections cluster.<plural>).
func openStores(url string) (*openedStores, error) {
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
		st := api.Stores{
			Deployments: etcdstore.New[api.Deployment](cli, p+"deployments/"),
			ReplicaSets: etcdstore.New[api.ReplicaSet](cli, p+"replicasets/"),
			Pods:        etcdstore.New[api.Pod](cli, p+"pods/"),
			Nodes:       etcdstore.New[api.Node](cli, p+"nodes/"),
			Leases:      etcdstore.New[api.Lease](cli, p+"leases/"),
			Events:      etcdstore.New[events.Event](cli, p+"events/"),
		}
		return &openedStores{Stores: st, describe: "etcd " + hosts + ", keys under " + p, close: func() { _ = cli.Close() }}, nil
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
		st := api.Stores{
			Deployments: pgstore.New[api.Deployment](db, "deployments"),
			ReplicaSets: pgstore.New[api.ReplicaSet](db, "replicasets"),
			Pods:        pgstore.New[api.Pod](db, "pods"),
			Nodes:       pgstore.New[api.Node](db, "nodes"),
			Leases:      pgstore.New[api.Lease](db, "leases"),
			Events:      pgstore.New[events.Event](db, "events"),
		}
		return &openedStores{Stores: st, describe: "PostgreSQL, schema " + storeSchema, close: func() { db.Close(); pool.Close() }}, nil
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
