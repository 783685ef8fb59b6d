package informer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// A reconcile that provisions something outside the store keeps its
// finalizer with Finalize: the first call adds it before anything is
// provisioned; after a deletion request the call cleans up, and removing
// the finalizer deletes the key.
func ExampleFinalize() {
	ctx := context.Background()
	store, err := memstore.New[string, Database]()
	if err != nil {
		log.Fatal(err)
	}
	store.Put("db", Database{Size: 10})
	const fin = "databases.example.com/backups"

	reconcile := func(key string) {
		db, _, ok, _ := store.Get(ctx, key) // a controller reads its informer's cache
		if !ok {
			fmt.Println(key, "is gone")
			return
		}
		live, err := informer.Finalize(ctx, store, key, &db, fin, func(ctx context.Context) (bool, error) {
			fmt.Println("deleting the backups of", key)
			return true, nil // done: the finalizer may go
		})
		if err != nil || !live {
			return
		}
		fmt.Println("provisioning", key, "of size", db.Size)
	}

	reconcile("db")
	db, _, _, _ := store.Get(ctx, "db")
	fmt.Println("finalizers:", db.Finalizers)
	_, _, _ = informer.RequestDelete(ctx, store, "db")
	reconcile("db")
	reconcile("db")
	// Output:
	// provisioning db of size 10
	// finalizers: [databases.example.com/backups]
	// deleting the backups of db
	// db is gone
}
