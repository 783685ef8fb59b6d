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

// Store holds one kind of object by name: an informer.Source for the
// controllers' informers, plus reads and compare-and-swap writes. Two
// implementations: the embedded memory store (*memstore.Store) and etcd
// (*etcdstore.Store, which keeps the values as JSON under a prefix, where
// `etcdctl put` can change them).
type Store[V any] = informer.Store[string, V]

// stores are the two kinds of objects the example keeps.
type stores struct {
	replicaSets Store[ReplicaSet]
	pods        Store[Pod]
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

// apply sets a ReplicaSet's spec, creating it if needed, and bumps its
// generation when the spec changed: the API server's part. The status is
// kept. It returns the stored object.
func apply(ctx context.Context, s Store[ReplicaSet], name string, spec ReplicaSetSpec) (ReplicaSet, error) {
	for {
		cur, rev, ok, err := s.Get(ctx, name)
		if err != nil {
			return ReplicaSet{}, err
		}
		next := cur
		switch {
		case !ok:
			next = ReplicaSet{Generation: 1, Spec: spec}
		case sameJSON(cur.Spec, spec):
			return cur, nil
		default:
			next.Generation++
			next.Spec = spec
		}
		if ok {
			_, err = s.Update(ctx, name, next, rev)
		} else {
			_, err = s.Create(ctx, name, next)
		}
		if errors.Is(err, informer.ErrConflict) {
			continue // someone else wrote: read again
		}
		return next, err
	}
}

// updateStatus is a controller's read-modify-write of an object's status:
// it reads the latest value, lets change set the status (change returns
// false when there is nothing to write, or the object is gone or no longer
// this writer's), and writes it with compare-and-swap, retrying on conflicts.
func updateStatus[V any](ctx context.Context, s Store[V], key string, change func(v *V, exists bool) bool) error {
	for attempt := 0; ; attempt++ {
		v, rev, ok, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		if !change(&v, ok) || !ok {
			return nil
		}
		_, err = s.Update(ctx, key, v, rev)
		if errors.Is(err, informer.ErrConflict) && attempt < 10 {
			continue
		}
		return err
	}
}
