package events_test

import (
	"context"
	"fmt"
	"log"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer/memstore"
)

// A reconciler records what it did to a key; repeats are counted, and the
// events can be shown next to the key (MemorySink) and kept in a store for
// other processes (StoreSink, whose Run a Manager's AddFunc would start).
func Example() {
	ctx := context.Background()
	mem, err := events.NewMemorySink(0)
	if err != nil {
		log.Fatal(err)
	}
	store, err := memstore.New[string, events.Event]()
	if err != nil {
		log.Fatal(err)
	}
	sink, err := events.NewStoreSink(store)
	if err != nil {
		log.Fatal(err)
	}
	rec, err := events.NewRecorder("replicaset-controller", events.WithSink(mem), events.WithSink(sink))
	if err != nil {
		log.Fatal(err)
	}

	rec.Event(ctx, "web", events.Normal, "SuccessfulCreate", "Created pod: web-1")
	for range 3 {
		rec.Eventf(ctx, "web", events.Warning, "FailedCreate", "Error creating: %s", "exceeded quota: pods, limit 1")
	}

	for _, e := range mem.Events("web") { // newest first
		fmt.Printf("%-7s %-16s x%d %s\n", e.Type, e.Reason, e.Count, e.Message)
	}
	if err := sink.Flush(ctx); err != nil { // Run does this in the background
		fmt.Println(err)
	}
	fmt.Println("records in the store:", store.Len())
	// Output:
	// Warning FailedCreate     x3 Error creating: exceeded quota: pods, limit 1
	// Normal  SuccessfulCreate x1 Created pod: web-1
	// records in the store: 2
}
