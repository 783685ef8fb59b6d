package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
)

// Controller.Status tells what the controller knows of a failing key, and
// prints as one line. Here the key fails once and, with WithMaxAttempts(1),
// is parked until it changes.
func ExampleController_Status() {
	store, err := memstore.New[string, Spec]()
	if err != nil {
		log.Fatal(err)
	}
	store.Put("web", Spec{Replicas: 3})
	specs, err := informer.New("specs", store, informer.WithLogger(quietLogger))
	if err != nil {
		log.Fatal(err)
	}
	c, err := reconcile.New("scaler", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, errors.New("quota exceeded")
	}), reconcile.For(specs), reconcile.WithMaxAttempts(1), reconcile.WithLogger(quietLogger))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- specs.Run(ctx) }()
	go func() { done <- c.Run(ctx) }()
	defer func() { stop(); <-done; <-done }()
	for len(c.Parked()) == 0 { // a test waits with package reconciletest
		time.Sleep(time.Millisecond)
	}
	st, failing := c.Status("web")
	fmt.Println(failing, st.Attempts)
	fmt.Println(st)
	// Output:
	// true 1
	// parked after 1 failed attempt, last error: quota exceeded; not retried until the key changes or is unparked
}
