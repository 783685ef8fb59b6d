package apiserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/internal/must"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fixture struct {
	raw    api.Stores // under the server: what was really written
	srv    *httptest.Server
	client api.Stores // httpstore clients with the read-write token
}

func newFixture(t *testing.T) *fixture {
	raw := must.Do(api.NewMemoryStores())
	s := must.Do(New(raw, Options{Tokens: map[string]httpstore.Access{"rw": httpstore.ReadWrite, "ro": httpstore.ReadOnly},
		TolerationSeconds: 300, Clock: clocktesting.NewFakeClock(t0)}))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cl, err := NewStores(srv.URL, "rw", httpstore.ClientOptions{})
	require.NoError(t, err)
	return &fixture{raw: raw, srv: srv, client: cl}
}

func (f *fixture) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	req, err := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]any{}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

const deployYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: %s
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      containers: [{name: web, command: [cluster, worker]}]
`

func deploy(replicas, label string) string {
	return fmt.Sprintf(deployYAML, replicas, label)
}

func count[V any](t *testing.T, st informer.Store[string, V]) int {
	entries, _, err := st.List(t.Context())
	require.NoError(t, err)
	return len(entries)
}

func TestRESTShouldCreateAYAMLDeploymentWithDefaults(t *testing.T) {
	f := newFixture(t)
	code, out := f.do(t, "POST", "/apis/apps/v1/namespaces/default/deployments", "rw", deploy("3", "web"))
	require.Equal(t, http.StatusCreated, code, out)
	assert.Equal(t, "Deployment", out["kind"])
	d, _, ok, err := f.raw.Deployments.Get(t.Context(), "default/web")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, "25%", d.Spec.Strategy.RollingUpdate.MaxSurge)
	assert.Equal(t, int32(600), *d.Spec.ProgressDeadlineSeconds)
	assert.Len(t, d.UID, 36)
	assert.Equal(t, t0, d.CreationTimestamp)

	code, out = f.do(t, "GET", "/apis/apps/v1/namespaces/default/deployments/web", "ro", "")
	require.Equal(t, http.StatusOK, code)
	assert.NotEmpty(t, out["metadata"].(map[string]any)["resourceVersion"])
	code, out = f.do(t, "GET", "/apis/apps/v1/namespaces/other/deployments", "ro", "")
	require.Equal(t, http.StatusOK, code)
	assert.Empty(t, out["items"], "another namespace's list")
}

func TestRESTShouldRefuseBadWritesAndWriteNothing(t *testing.T) {
	f := newFixture(t)
	for name, tc := range map[string]struct {
		token, body string
		code        int
		want        string
	}{
		"negative replicas":  {"rw", deploy("-1", "web"), 422, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"},
		"selector mismatch":  {"rw", deploy("1", "db"), 422, "`selector` does not match template `labels`"},
		"unknown field":      {"rw", strings.Replace(deploy("1", "web"), "replicas:", "replica:", 1), 400, `line 5: unknown field "spec.replica"`},
		"syntax error":       {"rw", "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: a: b}\n", 400, "error parsing YAML"},
		"unknown kind":       {"rw", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", 400, `no matches for kind "Service"`},
		"no token":           {"", deploy("1", "web"), 401, "Unauthorized"},
		"unknown token":      {"nope", deploy("1", "web"), 401, "Unauthorized"},
		"read-only token":    {"ro", deploy("1", "web"), 403, "Forbidden"},
		"other namespace":    {"rw", strings.Replace(deploy("1", "web"), "{name: web}", "{name: web, namespace: x}", 1), 400, "does not match the namespace"},
		"pod on deployments": {"rw", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, command: [x]}]}\n", 400, "the path is for deployments"},
	} {
		code, out := f.do(t, "POST", "/apis/apps/v1/namespaces/default/deployments", tc.token, tc.body)
		assert.Equal(t, tc.code, code, name)
		assert.Contains(t, out["message"], tc.want, name)
	}
	assert.Zero(t, count(t, f.raw.Deployments), "nothing written")
}

func TestStoreProtocolShouldAdmitAsTheRESTPathsDo(t *testing.T) {
	f := newFixture(t)
	bad := api.Deployment{Metadata: api.Metadata{Name: "web", Namespace: "default"}}
	_, err := f.client.Deployments.Create(t.Context(), "default/web", bad)
	require.ErrorIs(t, err, httpstore.ErrInvalid)
	assert.Contains(t, err.Error(), `Deployment.apps "web" is invalid: [spec.selector: Required value`)
	_, err = f.client.Deployments.Create(t.Context(), "default/other", bad)
	require.Error(t, err, "a key that is not the object's")
	assert.Zero(t, count(t, f.raw.Deployments), "nothing written")

	pod := api.Pod{Metadata: api.Metadata{Name: "p"}, Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Command: []string{"sleep"}}}}}
	_, err = f.client.Pods.Create(t.Context(), "default/p", pod)
	require.NoError(t, err)
	got, rev, _, err := f.raw.Pods.Get(t.Context(), "default/p")
	require.NoError(t, err)
	assert.Equal(t, "default", got.Namespace, "from the key")
	assert.Equal(t, api.RestartAlways, got.Spec.RestartPolicy)
	require.Len(t, got.Spec.Tolerations, 2, "the default not-ready and unreachable tolerations")
	assert.Equal(t, int64(300), *got.Spec.Tolerations[0].TolerationSeconds)
	uid := got.UID
	require.NotEmpty(t, uid)

	got.UID = ""
	got.Labels = map[string]string{"x": "y"}
	_, err = f.client.Pods.Update(t.Context(), "default/p", got, rev)
	require.NoError(t, err)
	got, _, _, err = f.raw.Pods.Get(t.Context(), "default/p")
	require.NoError(t, err)
	assert.Equal(t, uid, got.UID, "an update keeps the UID")

	ro, err := NewStores(f.srv.URL, "ro", httpstore.ClientOptions{})
	require.NoError(t, err)
	_, err = ro.Pods.Delete(t.Context(), "default/p", 0)
	require.ErrorIs(t, err, httpstore.ErrForbidden)
	assert.Equal(t, 1, count(t, f.raw.Pods))
}

func TestDeleteShouldRecordThePropagationPolicyAsAFinalizer(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"fg", "orph", "bg"} {
		code, out := f.do(t, "POST", "/apis/apps/v1/namespaces/default/deployments", "rw",
			strings.Replace(deploy("1", "web"), "{name: web}", "{name: "+name+"}", 1))
		require.Equal(t, http.StatusCreated, code, out)
	}
	code, _ := f.do(t, "DELETE", "/apis/apps/v1/namespaces/default/deployments/fg?propagationPolicy=Foreground", "rw", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = f.do(t, "DELETE", "/apis/apps/v1/namespaces/default/deployments/orph?propagationPolicy=Orphan", "rw", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = f.do(t, "DELETE", "/apis/apps/v1/namespaces/default/deployments/bg", "rw", "")
	require.Equal(t, http.StatusOK, code)
	code, out := f.do(t, "DELETE", "/apis/apps/v1/namespaces/default/deployments/fg?propagationPolicy=Sideways", "rw", "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out["message"], `unsupported propagation policy "Sideways"`)

	fg, _, ok, _ := f.raw.Deployments.Get(t.Context(), "default/fg")
	require.True(t, ok, "a foreground deletion waits for the garbage collector")
	assert.Equal(t, []string{api.FinalizerForeground}, fg.Finalizers)
	assert.True(t, fg.Deleting())
	orph, _, ok, _ := f.raw.Deployments.Get(t.Context(), "default/orph")
	require.True(t, ok)
	assert.Equal(t, []string{api.FinalizerOrphan}, orph.Finalizers)
	_, _, ok, _ = f.raw.Deployments.Get(t.Context(), "default/bg")
	assert.False(t, ok, "a background deletion deletes at once")
}

func TestRESTWatchShouldStreamAddedModifiedAndDeleted(t *testing.T) {
	f := newFixture(t)
	node := api.Node{Metadata: api.Metadata{Name: "n1"}}
	_, err := f.client.Nodes.Create(t.Context(), "n1", node)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/api/v1/nodes?watch=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer ro")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func() (string, string) {
		require.True(t, lines.Scan())
		var ev struct {
			Type   string
			Object api.Node
		}
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
		return ev.Type, ev.Object.Name
	}
	typ, name := next()
	assert.Equal(t, [2]string{"ADDED", "n1"}, [2]string{typ, name})
	_, _, err = informer.Update(t.Context(), f.client.Nodes, "n1", func(n *api.Node) error { n.Spec.Unschedulable = true; return nil })
	require.NoError(t, err)
	typ, _ = next()
	assert.Equal(t, "MODIFIED", typ)
	_, err = f.client.Nodes.Delete(t.Context(), "n1", 0)
	require.NoError(t, err)
	typ, _ = next()
	assert.Equal(t, "DELETED", typ)
}
