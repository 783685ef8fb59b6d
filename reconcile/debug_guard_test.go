package reconcile_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestTheDebugPagesShouldRefuseAHostHeaderThatIsNotLoopback(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	for host, want := range map[string]int{
		"localhost":              http.StatusOK,
		"localhost:8081":         http.StatusOK,
		"127.0.0.1:8081":         http.StatusOK,
		"127.0.0.1":              http.StatusOK,
		"[::1]:8081":             http.StatusOK,
		"[::1]":                  http.StatusOK,
		"evil.example:8081":      http.StatusForbidden, // a rebound name resolving to 127.0.0.1
		"evil.example":           http.StatusForbidden,
		"localhost.evil.example": http.StatusForbidden,
		"":                       http.StatusForbidden,
	} {
		req := httptest.NewRequest(http.MethodGet, "/debug/converge/?format=json", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = host
		w := httptest.NewRecorder()
		m.DebugHandler().ServeHTTP(w, req)
		assert.Equal(t, want, w.Code, "Host %q", host)
	}
}

func TestANotFoundAskedForInJSONShouldBeJSON(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	for _, path := range []string{keyPath("nobody") + "?format=json", "/debug/converge/controllers/nope?format=json"} {
		code, body := getPage(t, m.DebugHandler(), path, "")
		assert.Equal(t, http.StatusNotFound, code, path)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(body), &e), "%s: %s", path, body)
		assert.NotEmpty(t, e.Error, path)
	}
}

func TestTheJSONPagesShouldNameEnumsNotNumberThem(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	code, body := getPage(t, m.DebugHandler(), keyPath("parked")+"?format=json", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"Kind": "initial list"`)
	assert.Contains(t, body, `"Change": "added"`)
	assert.Contains(t, body, `"Kind": "backoff"`)
	var k debugpage.KeyPage
	require.NoError(t, json.Unmarshal([]byte(body), &k), "names read back")
	require.Len(t, k.Recent, 2)
	assert.Equal(t, reconcile.TriggerInitialList.String(), k.Recent[1].Triggers[0].Kind)
	assert.Equal(t, reconcile.Added.String(), k.Recent[1].Triggers[0].Change)
}

func TestTheLastErrorShouldBeShownNotFoldedAway(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	for _, path := range []string{keyPath("parked"), "/debug/converge/controllers/ints"} {
		code, body := getPage(t, m.DebugHandler(), path, "")
		require.Equal(t, http.StatusOK, code, body)
		assert.NotContains(t, body, "<details>", path)
		assert.Contains(t, body, "<pre>quota exceeded</pre>", path)
	}
	_, body := getPage(t, m.DebugHandler(), keyPath("long"), "")
	assert.Contains(t, body, "first 1024 of 3018 bytes", "a cut error still says so")
	assert.Contains(t, body, "<pre>long: xxx")
}

func TestAHealthyKeyShouldHaveAPageAfterItsReconcilesLeftTheHistory(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("quiet", 1)
	inf := reconciletest.Informer(h, "ints", store)
	c := reconciletest.Controller(h, "ints", newRecorder(store), reconcile.For(inf), reconcile.WithWorkers(1), quiet)
	h.Settle()
	// Push "quiet" out of the worker's ring (64 reconciles) with others'.
	for i := range 70 {
		store.Put("busy", i)
		h.Settle()
	}
	info, _ := reconcile.InspectKey(c, "quiet")
	require.Empty(t, info.Recent, "precondition: no reconcile of quiet is remembered")
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Debug: reconcile.DebugOptions{Enabled: true}, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	code, body := getPage(t, m.DebugHandler(), "/debug/converge/controllers/ints/keys/quiet", "")
	assert.Equal(t, http.StatusOK, code, "the informer holds it: %s", body)
	assert.Contains(t, body, "not failing")
	code, _ = getPage(t, m.DebugHandler(), "/debug/converge/controllers/ints/keys/gone", "")
	assert.Equal(t, http.StatusNotFound, code, "a key the informer does not hold either")
}
