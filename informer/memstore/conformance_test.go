package memstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// TestStoreConformance runs the Store conformance suite (the Source suite
// included, written through the store's own Create, Update and Delete) on
// the memory store, with its default history (no subtest writes anywhere
// near it).
func TestStoreConformance(t *testing.T) {
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, int]{
		New: func(*testing.T) informer.Store[string, int] { return must.Do(memstore.New[string, int]()) },
		// Compact(Revision()) leaves only "from now on" watchable.
		Expire: func(_ context.Context, s informer.Store[string, int]) error {
			m := s.(*memstore.Store[string, int])
			m.Compact(m.Revision())
			return nil
		},
		DeletesCarryValue: true,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		// Never 0: a Delete carrying the zero int would pass for one
		// carrying the value.
		Value: func(i int) int { return i + 1 },
	})
}

// TestSourceConformance runs the Source conformance suite with the blind
// Put, the write that seeds stores and that RunStore's suite does not use.
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Suite[string, int]{
		New: func(*testing.T) sourcetest.Backend[string, int] {
			s := must.Do(memstore.New[string, int]())
			return sourcetest.Backend[string, int]{
				Source: s,
				Put:    func(_ context.Context, k string, v int) error { s.Put(k, v); return nil },
				Delete: func(ctx context.Context, k string) error { _, err := s.Delete(ctx, k, 0); return err },
				// Compact(Revision()) leaves only "from now on" watchable.
				Expire:            func(context.Context) error { s.Compact(s.Revision()); return nil },
				DeletesCarryValue: true,
			}
		},
		Key: func(i int) string { return "k" + strconv.Itoa(i) },
		// Never 0: a Delete carrying the zero int would pass for one
		// carrying the value.
		Value: func(i int) int { return i + 1 },
	})
}
