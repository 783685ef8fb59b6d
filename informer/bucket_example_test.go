package informer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// A replica's informer caches only the buckets it holds: none at first,
// then what AcquireBucket loads, until ReleaseBucket. A sharded
// controller (reconcile.WithShards) makes these calls itself as its
// replica acquires and hands over buckets.
func ExampleBucketed() {
	store, err := memstore.New[string, int]()
	if err != nil {
		log.Fatal(err)
	}
	for i, k := range []string{"0/a", "1/a", "1/b", "2/a"} {
		store.Put(k, i)
	}
	bucketOf := func(k string) int { return int(k[0] - '0') } // "<bucket>/<name>"
	inf, err := informer.New("ints", informer.Bucketed(memstore.WithBuckets(store, bucketOf), bucketOf))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- inf.Run(ctx) }()
	if err := inf.WaitForCache(ctx); err != nil {
		panic(err)
	}
	fmt.Println("cached before acquiring:", inf.Len())
	if err := inf.AcquireBucket(ctx, 1); err != nil {
		panic(err)
	}
	fmt.Println("cached with bucket 1:", inf.Len())
	inf.ReleaseBucket(1)
	fmt.Println("cached after releasing it:", inf.Len())
	cancel()
	<-done
	// Output:
	// cached before acquiring: 0
	// cached with bucket 1: 2
	// cached after releasing it: 0
}
