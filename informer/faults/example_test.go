package faults_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
)

// Run an informer against a store that fails at random, then heal it and
// check that the cache converged.
func Example() {
	store, err := memstore.New[string, int]()
	if err != nil {
		log.Fatal(err)
	}
	src, err := faults.New(store, 42) // log the seed: it replays the faults
	if err != nil {
		log.Fatal(err)
	}
	inf, err := informer.New("demo", src,
		informer.WithLogger(slog.New(slog.DiscardHandler)),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond}))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- inf.Run(ctx) }()

	for i := range 100 {
		store.Put(fmt.Sprint("k", i%10), i)
	}
	src.Heal()
	for {
		if v, _ := inf.Get("k9"); v == 99 && inf.Len() == 10 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println("converged:", inf.Len(), "keys")
	cancel()
	<-done
	// Output: converged: 10 keys
}
