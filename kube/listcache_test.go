package kube_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/kube"
)

// pagingServer answers plain lists of configmaps in pages of one object,
// at the revision its head says, and records each list's query.
type pagingServer struct {
	mu      sync.Mutex
	head    string
	queries []url.Values
}

func (f *pagingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	write := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.URL.Path == "/api/v1":
		write(200, map[string]any{"resources": []any{map[string]any{"name": "configmaps", "namespaced": true, "kind": "ConfigMap"}}})
	case r.URL.Path == "/api/v1/namespaces/ns/configmaps":
		f.mu.Lock()
		defer f.mu.Unlock()
		f.queries = append(f.queries, r.URL.Query())
		item := func(name string) map[string]any {
			return map[string]any{"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": "3"}}
		}
		if r.URL.Query().Get("continue") == "" {
			write(200, map[string]any{"metadata": map[string]any{"resourceVersion": f.head, "continue": "page2"}, "items": []any{item("a")}})
			return
		}
		write(200, map[string]any{"metadata": map[string]any{"resourceVersion": f.head}, "items": []any{item("b")}})
	default:
		write(404, map[string]any{"kind": "Status", "code": 404, "reason": "NotFound"})
	}
}

func (f *pagingServer) listQueries() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries
}

// A paginated List is served from the server's watch cache, as client-go's
// reflector lists, not read from etcd page by page: its first page asks
// for a state not older than the highest revision the Store has seen (any
// state, resourceVersion 0, before it has seen one), so that it never goes
// back in time; the later pages follow the continue token alone.
func TestAPaginatedListShouldAskForAStateNotOlderThanTheHighestRevisionSeen(t *testing.T) {
	f := &pagingServer{head: "9"}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := kube.New[configMap](&rest.Config{Host: srv.URL}, configMapsGVR,
		kube.WithNamespace[configMap]("ns"), kube.WithListMode[configMap](kube.ListPaginated))
	require.NoError(t, err)

	entries, rev, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Len(t, entries, 2)
	assert.EqualValues(t, 9, rev)
	f.head = "12"
	_, _, err = s.List(t.Context())
	require.NoError(t, err)

	q := f.listQueries()
	require.Len(t, q, 4, "two lists of two pages")
	assert.Equal(t, "0", q[0].Get("resourceVersion"), "the first list, before any revision is known: any state")
	assert.False(t, q[0].Has("resourceVersionMatch"), "resourceVersion 0 alone: %v", q[0])
	assert.Equal(t, "page2", q[1].Get("continue"))
	assert.False(t, q[1].Has("resourceVersion") || q[1].Has("resourceVersionMatch"), "a continued page names no revision: %v", q[1])
	assert.Equal(t, "NotOlderThan", q[2].Get("resourceVersionMatch"))
	assert.Equal(t, "9", q[2].Get("resourceVersion"), "the next list, not older than the first")
}
