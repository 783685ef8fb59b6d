package sourcetest_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
)

// A Store implementation's test runs the Store suite, which includes the
// Source suite written through the store's own Create, Update and Delete.
// This is memstore's; a store over a server returns a fresh prefix or
// table from New and cleans it up with t.Cleanup.
func ExampleRunStore() {
	test := func(t *testing.T) { // func TestStoreConformance(t *testing.T)
		sourcetest.RunStore(t, sourcetest.StoreSuite[string, int]{
			New: func(t *testing.T) informer.Store[string, int] {
				s, err := memstore.New[string, int]()
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			Expire: func(_ context.Context, s informer.Store[string, int]) error {
				m := s.(*memstore.Store[string, int])
				m.Compact(m.Revision()) // only "from now on" stays watchable
				return nil
			},
			DeletesCarryValue: true,
			Key:               func(i int) string { return "k" + strconv.Itoa(i) },
			// Never 0: a delete carrying the zero int would pass for one
			// carrying the value.
			Value: func(i int) int { return i + 1 },
		})
	}
	_ = test
}

// A Source that is not a Store (a read-only follower of a table or an
// API) runs the Source suite: Backend says how to change the store behind
// it.
func ExampleRun() {
	test := func(t *testing.T) { // func TestSourceConformance(t *testing.T)
		sourcetest.Run(t, sourcetest.Suite[string, int]{
			New: func(t *testing.T) sourcetest.Backend[string, int] {
				s, err := memstore.New[string, int]()
				if err != nil {
					t.Fatal(err)
				}
				return sourcetest.Backend[string, int]{
					Source:            s,
					Put:               func(_ context.Context, k string, v int) error { s.Put(k, v); return nil },
					Delete:            func(ctx context.Context, k string) error { _, err := s.Delete(ctx, k, 0); return err },
					Expire:            func(context.Context) error { s.Compact(s.Revision()); return nil },
					DeletesCarryValue: true,
				}
			},
			Key:   func(i int) string { return "k" + strconv.Itoa(i) },
			Value: func(i int) int { return i + 1 },
		})
	}
	_ = test
}
