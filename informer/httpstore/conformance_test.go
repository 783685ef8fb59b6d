package httpstore_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// memServed returns a client of a fresh memory store served on loopback,
// and the store.
func memServed(t *testing.T) (*httpstore.Client[int], *memstore.Store[string, int]) {
	m := must.Do(memstore.New[string, int]())
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

// item is a value type that the memory store, holding raw JSON, may hold
// bad values of.
type item struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

func itemValue(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} }

// TestSourceConformanceWithBlindWritesAndUndecodableValues runs the Source
// suite on a Client of items served from a memory store of raw JSON,
// written behind the server's back: good items, and (PutUndecodable) a JSON
// number where an item is an object, as a writer of another version might
// leave. The client must hand that on as a bad entry, never fail.
func TestSourceConformanceWithBlindWritesAndUndecodableValues(t *testing.T) {
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			m := must.Do(memstore.New[string, json.RawMessage]())
			srv := httptest.NewServer(must.Do(httpstore.NewServer[json.RawMessage](m, httpstore.ServerOptions[json.RawMessage]{})))
			t.Cleanup(srv.Close)
			c, err := httpstore.NewClient[item](srv.URL, httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
			require.NoError(t, err)
			return sourcetest.Backend[string, item]{
				Source: c,
				Put: func(_ context.Context, k string, v item) error {
					b, err := json.Marshal(v)
					m.Put(k, b)
					return err
				},
				Delete: func(ctx context.Context, k string) error { _, err := m.Delete(ctx, k, 0); return err },
				Expire: func(context.Context) error { m.Compact(m.Revision()); return nil },
				PutUndecodable: func(_ context.Context, k string) error {
					m.Put(k, json.RawMessage("42"))
					return nil
				},
				DeletesCarryValue: true,
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: itemValue,
	})
}
