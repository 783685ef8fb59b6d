package reconcile_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// A sharded controller: every replica runs it, and each reconciles only
// the keys of the buckets its Sharder holds, with the bucket's epoch in
// the context for fenced writes. Here one replica holds every bucket.
func ExampleWithShards() {
	store, err := memstore.New[string, int]()
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		store.Put(k, 1)
	}
	s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "ints", Identity: "replica-1", Buckets: 8})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // a key may be reconciled twice at start-up
	inf, err := informer.New("ints", store)
	if err != nil {
		log.Fatal(err)
	}
	c, err := reconcile.New("ints", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		b, _ := shard.FromContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen[fmt.Sprintf("%s in bucket %d", key, b.ID)] = true
		return reconcile.Result{}, nil
	}), reconcile.For(inf), reconcile.WithShards(s))
	if err != nil {
		panic(err)
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s})
	if err != nil {
		panic(err)
	}
	_ = m.AddController(c) // and the informer it watches
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, s := range slices.Sorted(maps.Keys(seen)) {
		fmt.Println(s)
	}
	// Output:
	// a in bucket 4
	// b in bucket 5
	// c in bucket 2
}
