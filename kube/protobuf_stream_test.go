package kube_test

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/kube"
)

// protoObject is an object as the server sends it in protobuf: the
// "k8s\0" prefix, then a runtime.Unknown with the object in raw.
func protoObject(t *testing.T, kind string, raw []byte) []byte {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	require.NoError(t, err)
	return append([]byte("k8s\x00"), b...)
}

// protoWatchFrame is one event of a protobuf watch stream: a 4-byte
// big-endian length, then a metav1.WatchEvent with the enveloped object.
func protoWatchFrame(t *testing.T, typ string, obj []byte) []byte {
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: obj}}
	b, err := ev.Marshal()
	require.NoError(t, err)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func protoConfigMapObject(t *testing.T, name, rv string, annotations map[string]string) []byte {
	cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv, Annotations: annotations}}
	if name != "" {
		cm.Data = map[string]string{"n": name}
	}
	b, err := cm.Marshal()
	require.NoError(t, err)
	return protoObject(t, "ConfigMap", b)
}

// Where the server streams lists and the Store asks for protobuf, the
// stream is protobuf frames: List takes the initial events up to the
// bookmark that ends them, as from JSON. (The test server's etcd cannot
// stream lists.)
func TestListShouldStreamProtobufWhereTheServerCan(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"resources": []any{
				map[string]any{"name": "configmaps", "namespaced": true, "kind": "ConfigMap"}}})
		case r.URL.Query().Get("sendInitialEvents") == "true" &&
			strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf"):
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
			for _, f := range [][]byte{
				protoWatchFrame(t, "ADDED", protoConfigMapObject(t, "b", "7", nil)),
				protoWatchFrame(t, "ADDED", protoConfigMapObject(t, "a", "5", nil)),
				protoWatchFrame(t, "BOOKMARK", protoConfigMapObject(t, "", "9", map[string]string{"k8s.io/initial-events-end": "true"})),
				protoWatchFrame(t, "ADDED", protoConfigMapObject(t, "c", "10", nil)),
			} {
				_, _ = w.Write(f)
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.Error(w, "not here", http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	s, err := kube.New[protoConfigMap](&rest.Config{Host: srv.URL}, configMapsGVR,
		kube.WithNamespace[protoConfigMap]("ns"), kube.WithProtobuf[protoConfigMap](), kube.WithListMode[protoConfigMap](kube.ListStreaming))
	require.NoError(t, err)

	entries, rev, err := s.List(t.Context())
	require.NoError(t, err)
	got := map[string]uint64{}
	for _, e := range entries {
		require.NoError(t, e.Err)
		got[e.Key] = uint64(e.Revision)
		assert.Equal(t, e.Key, e.Value.Data["n"])
	}
	assert.Equal(t, map[string]uint64{"a": 5, "b": 7}, got)
	assert.Equal(t, uint64(9), uint64(rev))
	assert.Equal(t, kube.Stats{StreamedLists: 1, ProtobufReads: 1}, s.Stats())
}
