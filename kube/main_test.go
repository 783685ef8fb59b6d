package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/kube"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The idle keep-alive connection of client-go's shared HTTP transport, and
		// klog's flush daemon (started by client-go's init).
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// restConfig returns the config of the real kube-apiserver (skipped
// without one, failed with CONVERGE_INTEGRATION=1).
func restConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", testserver.Kubeconfig(t))
	require.NoError(t, err, "kubeconfig")
	return cfg
}

var (
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// namespace creates a namespace no other test uses and returns its name.
// Without a namespace controller nothing deletes it; the server's data is
// thrown away after the run.
func namespace(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := "ct-" + hex.EncodeToString(b)
	ns, err := kube.New[struct{}](cfg, namespacesGVR)
	require.NoError(t, err)
	_, err = ns.Create(t.Context(), name, struct{}{})
	require.NoError(t, err, "create namespace %s", name)
	return name
}

// compactKubeEtcd compacts the kube-apiserver's etcd to its current
// revision, through etcd's JSON gateway: the watches the server serves
// from etcd (of secrets, which it does not cache) then fail with 410 Gone
// from an older resourceVersion.
func compactKubeEtcd(ctx context.Context, endpoint string) error {
	var head struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := etcdPost(ctx, endpoint, "/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/"))}, &head); err != nil {
		return err
	}
	return etcdPost(ctx, endpoint, "/v3/kv/compaction", map[string]any{"revision": head.Header.Revision, "physical": true}, nil)
}

func etcdPost(ctx context.Context, endpoint, path string, body any, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+endpoint+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// watching runs s.Watch(after) until the test ends and returns its
// changes (bookmarks left out) and, once it ended, its error.
func watching[V any](t *testing.T, s informer.Source[string, V], after informer.Revision) (<-chan informer.Event[string, V], <-chan error) {
	t.Helper()
	events := make(chan informer.Event[string, V], 100)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- s.Watch(ctx, after, func(e informer.Event[string, V]) error {
			if e.Type != informer.Bookmark {
				events <- e
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("the watch ended with %v", err)
		}
	})
	return events, done
}

// next returns the next change, failing t if the watch ends or none comes
// within 30 seconds.
func next[V any](t *testing.T, events <-chan informer.Event[string, V], done <-chan error) informer.Event[string, V] {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case e := <-events:
		return e
	case err := <-done:
		t.Fatalf("the watch ended: %v", err)
	case <-timeout.C:
		t.Fatal("no change watched in 30s")
	}
	panic("unreachable")
}
