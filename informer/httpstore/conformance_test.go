package httpstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
)

// memServed returns a client of a fresh memory store served on loopback,
// and the store.
func memServed(t *testing.T) (*httpstore.Client[int], *memstore.Store[string, int]) {
	m := memstore.New[string, int]()
	c, _ := serve[int](t, m, httpstore.ServerOptions[int]{}, "")
	return c, m
}

// TestStoreConformanceOverMemstore runs the Store conformance suite (the
// Source suite included) on a Client of a Server of the memory store.
func TestStoreConformanceOverMemstore(t *testing.T) {
	stores := map[informer.Store[string, int]]*memstore.Store[string, int]{}
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, int]{
		New: func(t *testing.T) informer.Store[string, int] {
			c, m := memServed(t)
			stores[c] = m
			return c
		},
		Expire: func(_ context.Context, s informer.Store[string, int]) error {
			m := stores[s]
			m.Compact(m.Revision())
			return nil
		},
		DeletesCarryValue: true,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) int { return i + 1 },
	})
}
