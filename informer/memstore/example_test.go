package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// A store is a map with revisions, and a Source: List, then Watch the
// changes after the listed revision.
func ExampleStore() {
	s, err := memstore.New[string, string]()
	if err != nil {
		log.Fatal(err)
	}
	s.Put("web", "3 replicas")
	s.Put("db", "1 replica")

	entries, rev, _ := s.List(context.Background())
	fmt.Println(len(entries), "entries at revision", rev)

	s.Put("web", "5 replicas")
	_, _ = s.Delete(context.Background(), "db", 0)

	stop := errors.New("seen enough")
	err = s.Watch(context.Background(), rev, func(e informer.Event[string, string]) error {
		fmt.Println(e.Revision, e.Type, e.Key, e.Value)
		if e.Revision == s.Revision() {
			return stop
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// 2 entries at revision 2
	// 3 Put web 5 replicas
	// 4 Delete db 1 replica
	// seen enough
}

// Update is compare-and-swap on a key's revision: a read-modify-write that
// loses no concurrent change.
func ExampleStore_Update() {
	ctx := context.Background()
	s, err := memstore.New[string, int]()
	if err != nil {
		log.Fatal(err)
	}
	_, _ = s.Create(ctx, "counter", 1)

	v, rev, _, _ := s.Get(ctx, "counter")
	s.Put("counter", 10) // someone else writes in between

	_, err = s.Update(ctx, "counter", v+1, rev)
	fmt.Println(errors.Is(err, informer.ErrConflict))

	v, rev, _, _ = s.Get(ctx, "counter") // read again, retry
	rev, err = s.Update(ctx, "counter", v+1, rev)
	fmt.Println(rev, err)
	// Output:
	// true
	// 3 <nil>
}

// Compact forgets history: a watch can resume after the compacted revision,
// not before it.
func ExampleStore_Compact() {
	s, err := memstore.New[string, int]()
	if err != nil {
		log.Fatal(err)
	}
	for i := range 5 {
		s.Put("k", i)
	}
	s.Compact(3)
	none := func(informer.Event[string, int]) error { return errors.New("unexpected") }
	err = s.Watch(context.Background(), 2, none)
	fmt.Println(errors.Is(err, informer.ErrRevisionExpired))
	err = s.Watch(context.Background(), 3, func(e informer.Event[string, int]) error {
		fmt.Println(e.Revision, e.Value)
		return errors.New("done")
	})
	fmt.Println(err)
	// Output:
	// true
	// 4 3
	// done
}
