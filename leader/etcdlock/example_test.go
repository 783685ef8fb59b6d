package etcdlock_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/shard"
)

// Config is a value the leader writes in these examples.
type Config struct {
	Replicas int `json:"replicas"`
}

// One leader among the processes that share an etcd key. Its writes are
// fenced by its term, so a deposed leader's late write is refused
// (etcdstore.ErrFenced), not applied. It needs an etcd server, so it is
// compiled but not run.
func ExampleNewLock() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // the client logs every compacted watch otherwise
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdstore.New[Config](cli, "/myapp/configs/")
	if err != nil {
		log.Fatal(err)
	}
	host, _ := os.Hostname()

	e, err := leader.New(etcdlock.NewLock(cli, "/myapp/locks/configurer"), leader.Config{
		Identity:        host, // unique per process
		ReleaseOnCancel: true,
		OnStartedLeading: func(ctx context.Context) {
			term, _ := leader.TermFromContext(ctx)
			fenced, err := store.Fenced(etcdstore.TermFence("/myapp/fences/configurer", term))
			if err != nil {
				log.Fatal(err)
			}
			_, _, err = informer.CreateOrUpdate(ctx, fenced, "web", func(c *Config) error {
				c.Replicas = 3
				return nil
			})
			if errors.Is(err, etcdstore.ErrFenced) {
				return // a newer term has written: this one is over
			}
			<-ctx.Done()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Locks under one root are a shard.Backend: each replica holds some of
// the buckets, each bucket's lease one etcd key under the root.
func ExampleNewLocks() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	host, _ := os.Hostname()
	s, err := shard.New(etcdlock.NewLocks(cli, "/myapp/shards/"), shard.Config{Name: "configs", Identity: host})
	if err != nil {
		log.Fatal(err)
	}
	_ = s.Add(shard.HandlerFunc(func(stop, lease context.Context, b shard.Bucket) {
		<-stop.Done() // work on the keys of bucket b.ID until it moves away
	}))
	if err := s.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
