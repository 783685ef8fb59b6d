package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/memstore"
)

// stores are the two kinds of objects the example keeps, by name. The
// controllers see only informer.Store, so they run unchanged on the embedded
// memory store (memstore) and on etcd (etcdstore, which keeps the values as
// JSON under a prefix, where `etcdctl put` can change them).
type stores struct {
	replicaSets informer.Store[string, ReplicaSet]
	pods        informer.Store[string, Pod]
	describe    string
	close       func()
}

// openStores opens "memory" (the embedded store) or
// "etcd://host:port[,host:port...]", with keys under prefix + "replicasets/"
// and prefix + "pods/".
func openStores(url, prefix string) (*stores, error) {
	if url == "" || url == "memory" {
		return &stores{
			replicaSets: memstore.New[string, ReplicaSet](),
			pods:        memstore.New[string, Pod](),
			describe:    "the embedded memory store",
			close:       func() {},
		}, nil
	}
	hosts, ok := strings.CutPrefix(url, "etcd://")
	if !ok || hosts == "" {
		return nil, fmt.Errorf("--store %q: want memory or etcd://host:port", url)
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
	return &stores{
		replicaSets: etcdstore.New[ReplicaSet](cli, rsPrefix),
		pods:        etcdstore.New[Pod](cli, podPrefix),
		describe:    fmt.Sprintf("etcd %s, keys under %s", hosts, prefix),
		close:       func() { _ = cli.Close() },
	}, nil
}

// errDeleting is apply's answer for a ReplicaSet whose deletion was
// requested: its pods are on their way out, and so is it.
var errDeleting = errors.New("the replicaset is being deleted")

// apply sets a ReplicaSet's spec, creating it if needed, and bumps its
// generation when the spec changed: the API server's part. The status and
// the finalizers are kept.
func apply(ctx context.Context, s informer.Store[string, ReplicaSet], name string, spec ReplicaSetSpec) error {
	_, _, err := informer.CreateOrUpdate(ctx, s, name, func(rs *ReplicaSet) error {
		switch {
		case rs.Deleting():
			return errDeleting
		case rs.Generation > 0 && sameJSON(rs.Spec, spec):
			return nil // nothing to write
		}
		rs.Generation++
		rs.Spec = spec
		return nil
	})
	return err
}
