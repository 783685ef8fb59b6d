package pgstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sourcetest"
)

// TestStoreConformance runs the Store conformance suite, the Source suite
// included, against the real PostgreSQL, each subtest on a collection of
// its own in one schema. Expire compacts the whole schema's log, which is
// why the suite's subtests run one after another.
func TestStoreConformance(t *testing.T) {
	pool := newPool(t)
	db := newDB(t, pool, newSchema(t, pool))
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, item]{
		New: func(t *testing.T) informer.Store[string, item] {
			return pgstore.New[item](db, newColl())
		},
		Expire: func(ctx context.Context, s informer.Store[string, item]) error {
			_, err := s.(*pgstore.Store[item]).Compact(ctx, 0)
			return err
		},
		// Deletes are log rows without a value.
		DeletesCarryValue: false,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}
