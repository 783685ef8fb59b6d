package informer_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

type App struct {
	Replicas int
	Ready    bool
}

// setReady is the status write-back of docs/controllers.md: read, change a copy, write
// it only if nobody wrote in between, and read again on a conflict. It runs
// unchanged on every informer.Store.
func setReady(ctx context.Context, s informer.Store[string, App], name string) error {
	for {
		app, rev, ok, err := s.Get(ctx, name)
		if err != nil || !ok {
			return err
		}
		app.Ready = true
		if _, err = s.Update(ctx, name, app, rev); !errors.Is(err, informer.ErrConflict) {
			return err // written, or a real error; on a conflict, read again
		}
	}
}

// A compare-and-swap write back through informer.Store, here on the memory
// store.
func ExampleStore() {
	ctx := context.Background()
	store, err := memstore.New[string, App]()
	if err != nil {
		log.Fatal(err)
	}
	store.Put("web", App{Replicas: 3})
	if err := setReady(ctx, store, "web"); err != nil {
		fmt.Println(err)
	}
	app, _, _, _ := store.Get(ctx, "web")
	fmt.Printf("%+v\n", app)

	_, err = store.Create(ctx, "web", App{})
	fmt.Println(errors.Is(err, informer.ErrConflict))
	// Output:
	// {Replicas:3 Ready:true}
	// true
}
