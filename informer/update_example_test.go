package informer_test

import (
	"context"
	"fmt"
	"log"

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
	store, err := memstore.New[string, Database]()
	if err != nil {
		log.Fatal(err)
	}
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

// Cluster says what its spec is, so the helpers keep its Generation.
type Cluster struct {
	object.Meta
	Spec   ClusterSpec `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	} `json:"status"`
}

type ClusterSpec struct {
	Nodes int `json:"nodes"`
}

// ObjectSpec makes *Cluster an object.SpecObject.
func (c *Cluster) ObjectSpec() any { return c.Spec }

// A spec change bumps the generation, a status write does not, as the
// Kubernetes API server does: a controller records the generation it acted
// on, and a reader compares the two.
func ExampleUpdate_generation() {
	ctx := context.Background()
	store, err := memstore.New[string, Cluster]()
	if err != nil {
		log.Fatal(err)
	}
	show := func() {
		c, _, _, _ := store.Get(ctx, "c")
		fmt.Println("generation", c.Generation, "observed", c.Status.ObservedGeneration)
	}
	_, _, _ = informer.CreateOrUpdate(ctx, store, "c", func(c *Cluster) error { c.Spec.Nodes = 3; return nil })
	show()
	_, _, _ = informer.Update(ctx, store, "c", func(c *Cluster) error { c.Status.ObservedGeneration = c.Generation; return nil })
	show()
	_, _, _ = informer.Update(ctx, store, "c", func(c *Cluster) error { c.Spec.Nodes = 5; return nil })
	show()
	// Output:
	// generation 1 observed 0
	// generation 1 observed 1
	// generation 2 observed 1
}
