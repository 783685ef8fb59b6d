package shard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
)

// One replica alone holds every bucket; a Handler runs for each, with the
// bucket's epoch for fenced writes. With etcd or PostgreSQL, replace
// memlock.NewLocks with etcdlock.NewLocks or pglock.NewLocks and run one
// Sharder per process, each with its own Identity.
func Example() {
	s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "widgets", Identity: "replica-1", Buckets: 4})
	if err != nil {
		panic(err)
	}
	served := make(chan shard.Bucket, 4)
	_ = s.Add(shard.HandlerFunc(func(stop, lease context.Context, b shard.Bucket) {
		served <- b
		<-stop.Done() // work on b's keys until b must be given up
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	seen := map[int]bool{}
	for len(seen) < 4 {
		b := <-served
		seen[b.ID] = true
	}
	for len(s.Status().Held) < 4 { // IsLeader turns true a moment later
		time.Sleep(time.Millisecond)
	}
	fmt.Println("buckets held:", len(s.Status().Held), "of", s.Buckets())
	fmt.Println("key \"default/widget-1\" is in bucket", shard.BucketOf("default/widget-1", s.Buckets()))
	cancel()
	fmt.Println("left:", <-done)
	// Output:
	// buckets held: 4 of 4
	// key "default/widget-1" is in bucket 1
	// left: <nil>
}
