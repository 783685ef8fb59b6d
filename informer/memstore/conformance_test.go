package memstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
)

// TestSourceConformance runs the Source conformance suite on the memory
// store, with its default history (no subtest writes anywhere near it).
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Suite[string, int]{
		New: func(*testing.T) sourcetest.Backend[string, int] {
			s := memstore.New[string, int]()
			return sourcetest.Backend[string, int]{
				Source: s,
				Put:    func(_ context.Context, k string, v int) error { s.Put(k, v); return nil },
				Delete: func(_ context.Context, k string) error { s.Delete(k); return nil },
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
