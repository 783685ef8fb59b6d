package kube_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/kube"
)

// fakeServer speaks as much of the API as a List of configmaps needs:
// discovery, a streaming list (unless refuse, when it answers 500 as a
// server whose etcd has no progress notifications does), and a plain list.
type fakeServer struct {
	refuse    bool
	streamed  atomic.Int32 // streaming list requests
	paginated atomic.Int32 // plain list requests
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	write := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	cm := func(name, rv string) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": rv},
			"data": map[string]any{"n": name}}
	}
	switch {
	case r.URL.Path == "/api/v1":
		write(200, map[string]any{"resources": []any{map[string]any{"name": "configmaps", "namespaced": true, "kind": "ConfigMap"}}})
	case r.URL.Path == "/api/v1/namespaces/ns/configmaps" && r.URL.Query().Get("sendInitialEvents") == "true":
		f.streamed.Add(1)
		q := r.URL.Query()
		if f.refuse || q.Get("watch") != "1" || q.Get("resourceVersionMatch") != "NotOlderThan" || q.Get("allowWatchBookmarks") != "true" {
			write(500, map[string]any{"kind": "Status", "code": 500, "reason": "InternalError",
				"message": "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		// Initial events in no revision order, then the bookmark that
		// ends them, then a change that is not part of the list.
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": cm("b", "7")})
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": cm("a", "5")})
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"metadata": map[string]any{
			"resourceVersion": "9", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}})
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": cm("c", "10")})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.URL.Path == "/api/v1/namespaces/ns/configmaps":
		f.paginated.Add(1)
		write(200, map[string]any{"metadata": map[string]any{"resourceVersion": "9"},
			"items": []any{cm("a", "5"), cm("b", "7")}})
	default:
		write(404, map[string]any{"kind": "Status", "code": 404, "reason": "NotFound"})
	}
}

func fakeStore(t *testing.T, f *fakeServer) *kube.Store[configMap] {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := kube.New[configMap](&rest.Config{Host: srv.URL}, configMapsGVR, kube.WithNamespace[configMap]("ns"))
	require.NoError(t, err)
	return s
}

func listed(t *testing.T, s *kube.Store[configMap]) (map[string]uint64, uint64) {
	t.Helper()
	entries, rev, err := s.List(t.Context())
	require.NoError(t, err)
	got := map[string]uint64{}
	for _, e := range entries {
		got[e.Key] = uint64(e.Revision)
		assert.Equal(t, e.Key, e.Value.Data["n"])
	}
	return got, uint64(rev)
}

// Where the server streams lists, List takes the initial events up to the
// bookmark that ends them, at the bookmark's revision, and nothing after.
func TestListShouldStreamWhereTheServerCan(t *testing.T) {
	f := &fakeServer{}
	s := fakeStore(t, f)
	got, rev := listed(t, s)
	assert.Equal(t, map[string]uint64{"a": 5, "b": 7}, got)
	assert.Equal(t, uint64(9), rev)
	assert.Equal(t, kube.Stats{StreamedLists: 1, JSONReads: 1}, s.Stats())
	assert.Zero(t, f.paginated.Load())
}

// Where it refuses, ListAuto reads pages, and does not ask to stream again.
func TestListShouldFallBackToPagesWhereTheServerRefusesToStream(t *testing.T) {
	f := &fakeServer{refuse: true}
	s := fakeStore(t, f)
	for range 2 {
		got, rev := listed(t, s)
		assert.Equal(t, map[string]uint64{"a": 5, "b": 7}, got)
		assert.Equal(t, uint64(9), rev)
	}
	assert.Equal(t, kube.Stats{PaginatedLists: 2, StreamingUnsupported: true, JSONReads: 2}, s.Stats())
	assert.Equal(t, int32(1), f.streamed.Load(), "one refusal is enough")
}
