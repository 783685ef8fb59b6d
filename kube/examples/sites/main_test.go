package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/kube"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// client-go's shared transport keeps idle connections, and klog
		// starts its flush daemon at init; pgx and etcd close theirs.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// The scene's output, the same on every store.
const wantScene = `created docs with 2 pages
rendered docs/index.html: generation 1, 2 pages, finalizers [sites.example.converge.dev/files]
added the page faq
rendered docs/index.html: generation 2, 3 pages, finalizers [sites.example.converge.dev/files]
requested the deletion of docs
docs deleted; its directory exists: false
`

func unique() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// playScene runs the scene on the store c names and checks its output
// (the header line, which names the store, left out).
func playScene(t *testing.T, c storeConfig) {
	t.Helper()
	var out bytes.Buffer
	root := t.TempDir()
	require.NoError(t, run(t.Context(), config{store: c, root: root}, &out), "output so far:\n%s", out.String())
	_, scene, _ := strings.Cut(out.String(), "\n")
	assert.Equal(t, wantScene, scene)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries, "the finalizer should have removed the site's directory")
}

func TestTheSceneShouldRenderUpdateAndFinalizeASiteOnTheMemoryStore(t *testing.T) {
	playScene(t, storeConfig{URL: "memory"})
}

func TestTheSameControllerShouldPlayTheSameSceneOnTheKubernetesAPI(t *testing.T) {
	kubeconfig := testserver.Kubeconfig(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	ns := "sites-" + unique()
	namespaces, err := kube.New[struct{}](cfg, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	require.NoError(t, err)
	_, err = namespaces.Create(t.Context(), ns, struct{}{})
	require.NoError(t, err)
	playScene(t, storeConfig{URL: "kube", Kubeconfig: kubeconfig, Namespace: ns})
}

func TestTheSameControllerShouldPlayTheSameSceneOnEtcd(t *testing.T) {
	endpoints := testserver.Etcd(t)
	playScene(t, storeConfig{URL: "etcd://" + strings.Join(endpoints, ","), Prefix: "/sites-test-" + unique() + "/"})
}

func TestTheSameControllerShouldPlayTheSameSceneOnPostgreSQL(t *testing.T) {
	playScene(t, storeConfig{URL: testserver.Postgres(t), Prefix: "sites_test_" + unique()})
}

func TestAnUnknownStoreShouldBeAnErrorNamingTheChoices(t *testing.T) {
	err := run(t.Context(), config{store: storeConfig{URL: "mysql://x"}, root: filepath.Join(t.TempDir(), "x")}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want memory, etcd://host:port, postgres://user@host:port/db or kube")
}
