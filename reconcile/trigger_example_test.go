package reconcile_test

import (
	"context"
	"fmt"
	"log"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
)

// A reconciler that logs why it runs: the reasons are for people (logs,
// spans, debug pages), never an input of what it does.
func ExampleTriggersFrom() {
	store, err := memstore.New[string, Spec]()
	if err != nil {
		log.Fatal(err)
	}
	store.Put("web", Spec{Replicas: 3})
	specs, err := informer.New("specs", store)
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	c, err := reconcile.New("scaler", reconcile.Func(func(ctx context.Context, name string) (reconcile.Result, error) {
		for _, t := range reconcile.TriggersFrom(ctx) {
			fmt.Printf("%s runs for: %s\n", name, t)
		}
		close(done)
		return reconcile.Result{}, nil
	}), reconcile.For(specs), reconcile.WithTriggerReasons(), reconcile.WithLogger(quietLogger))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = specs.Run(ctx) }()
	go func() { _ = c.Run(ctx) }()
	<-done
	// Output:
	// web runs for: informer "specs" added (initial list)
}
