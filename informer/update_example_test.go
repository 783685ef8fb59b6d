package informer_test

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/object"
)

// Database is a user's value type; embedding object.Meta lets the helpers
// honour its finalizers.
type Database struct {
	object.Meta
	Size   int    `json:"size"`
	Status string `json:"status,omitempty"`
}

// A status write-back, a finalizer, and a deletion that waits for it: the
// helpers read, mutate a copy, and write at the revision read, retrying on
// a conflict.
func ExampleUpdate() {
	ctx := context.Background()
	store := memstore.New[string, Database]()
	const fin = "databases.example.com/backups"

	// Create with the controller's finalizer, so that no deletion goes
	// unseen.
	_, op, _ := informer.CreateOrUpdate(ctx, store, "db", func(d *Database) error {
		d.Size = 10
		d.AddFinalizer(fin)
		return nil
	})
	fmt.Println(op)

	// The status write-back.
	_, op, _ = informer.Update(ctx, store, "db", func(d *Database) error {
		d.Status = "Ready"
		return nil
	})
	fmt.Println(op)

	// A user asks for deletion: the key stays, marked, while a finalizer
	// is left.
	_, op, _ = informer.RequestDelete(ctx, store, "db")
	db, _, _, _ := store.Get(ctx, "db")
	fmt.Println(op, db.Deleting())

	// The controller cleans up, then removes its finalizer: the last one
	// deletes the key.
	_, op, _ = informer.Update(ctx, store, "db", func(d *Database) error {
		d.RemoveFinalizer(fin)
		return nil
	})
	_, _, ok, _ := store.Get(ctx, "db")
	fmt.Println(op, ok)
	// Output:
	// Created
	// Updated
	// Updated true
	// Deleted false
}
