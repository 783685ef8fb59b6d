package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

const scriptKey = "<script>alert(1)</script>"

// debugFixture is a Manager over one settled controller "ints" with a
// healthy key "ok", a key "long" failing with a 3000-byte error, a key
// "parked" parked after 2 attempts and a failing key named like a script.
// Its reconciler records a Normal event "Synced" on "ok" and a Warning
// "FailedCreate" with markup in its message on every failure.
func debugFixture(t *testing.T, opts reconcile.DebugOptions) (*reconcile.Manager, *reconcile.Controller[string]) {
	t.Helper()
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for _, k := range []string{"ok", "long", "parked", scriptKey} {
		store.Put(k, 1)
	}
	rec := newRecorder(store)
	mem := must.Do(events.NewMemorySink(0))
	ev := must.Do(events.NewRecorder("ints-controller", events.WithSink(mem), events.WithClock(h.Clock)))
	rec.outcome = func(key string, _ int) (reconcile.Result, error) {
		if key == "ok" {
			ev.Event(context.Background(), key, events.Normal, "Synced", "all good")
		} else {
			ev.Event(context.Background(), key, events.Warning, "FailedCreate", "<i>exceeded quota</i>")
		}
		switch key {
		case "long":
			return reconcile.Result{}, errors.New("long: " + strings.Repeat("x", 3000) + " <b>bold</b>")
		case "parked":
			return reconcile.Result{}, errors.New("quota exceeded")
		case scriptKey:
			return reconcile.Result{}, errors.New("<img src=x onerror=alert(2)>")
		}
		return reconcile.Result{}, nil
	}
	inf := reconciletest.Informer(h, "ints", store)
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Hour})
	c := reconciletest.Controller(h, "ints", rec, reconcile.For(inf), reconcile.WithMaxAttempts(2),
		reconcile.WithRateLimiter(limiter), reconcile.WithEventRecorder(ev),
		reconcile.WithTriggerReasons(), quiet) // on from the start: the Manager comes after the run
	h.Settle()
	h.Step(time.Second) // the second attempts: "parked" parks, so do the others
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Debug: opts, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	return m, c
}

// get serves path from h as a loopback client would, and returns the
// status and body.
func getPage(t *testing.T, h http.Handler, path string, accept string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Host = "127.0.0.1:8081"
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func keyPath(key string) string {
	return "/debug/converge/controllers/ints/keys/" + url.PathEscape(key)
}

func TestTheOverviewShouldListControllersAndInformersInHTMLAndJSON(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	h := m.DebugHandler()
	code, body := getPage(t, h, "/debug/converge/", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<a href="/debug/converge/controllers/ints">ints</a>`)
	assert.Contains(t, body, "<td>ints</td>", "the informer's row")
	assert.Contains(t, body, "No leader election")
	assert.NotContains(t, body, "Sharding", "no sharding block without Shards")
	assert.NotContains(t, body, "<script", "no script at all")

	code, body = getPage(t, h, "/debug/converge/?format=json", "")
	require.Equal(t, http.StatusOK, code)
	var o debugpage.Overview
	require.NoError(t, json.Unmarshal([]byte(body), &o))
	require.Len(t, o.Controllers, 1)
	assert.Equal(t, 3, o.Controllers[0].FailingTotal)
	assert.Equal(t, 3, o.Controllers[0].ParkedTotal)
	require.Len(t, o.Informers, 1)
	assert.Equal(t, 4, o.Informers[0].Len)
	assert.True(t, o.Informers[0].Synced)
	assert.Nil(t, o.Leader)
	assert.Nil(t, o.Sharding)
	assert.NotContains(t, body, `"Sharding"`)
}

func TestTheControllerPageShouldShowFailingAndParkedKeysWithKeysAndErrorsEscaped(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true, Refresh: 5 * time.Second})
	code, body := getPage(t, m.DebugHandler(), "/debug/converge/controllers/ints", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<meta http-equiv="refresh" content="5">`)
	assert.Contains(t, body, "Failing keys (3)")
	assert.Contains(t, body, "Parked keys (3)")
	assert.Contains(t, body, `<a href="/debug/converge/controllers/ints/keys/parked">parked</a> after 2 attempts`)
	assert.Contains(t, body, "first 1024 of 3018 bytes", "the long error is cut, with its length")
	assert.NotContains(t, body, "<script>", "the key is text")
	assert.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.Contains(t, body, `href="/debug/converge/controllers/ints/keys/%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`)
	assert.NotContains(t, body, "<img", "the error is text")
	assert.Contains(t, body, "&lt;img src=x onerror=alert(2)&gt;")

	code, body = getPage(t, m.DebugHandler(), "/debug/converge/controllers/ints", "application/json")
	require.Equal(t, http.StatusOK, code)
	var p debugpage.ControllerPage
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	assert.Equal(t, "ints", p.Name)
	assert.Len(t, p.Failing, 3)
}

func TestTheKeyPageShouldShowAParkedKeysAttemptsErrorAndRecentReconciles(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	code, body := getPage(t, m.DebugHandler(), keyPath("parked"), "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "<h1>Key parked</h1>")
	assert.Contains(t, body, "<tr><th>attempts</th><td>2</td></tr>")
	assert.Contains(t, body, "parked until it changes")
	assert.Contains(t, body, "<pre>quota exceeded</pre>")
	assert.Equal(t, 2, strings.Count(body, "<td>error</td>"), "both attempts among the recent reconciles")
	assert.Contains(t, body, `<li>informer &#34;ints&#34; added (initial list)</li>`, "the first run's trigger")
	assert.Contains(t, body, `<li>backoff</li>`, "the retry's trigger")

	code, body = getPage(t, m.DebugHandler(), keyPath("parked")+"?format=json", "")
	require.Equal(t, http.StatusOK, code)
	var k debugpage.KeyPage
	require.NoError(t, json.Unmarshal([]byte(body), &k))
	assert.Equal(t, "ints", k.Controller)
	assert.True(t, k.Parked)
	assert.Equal(t, 2, k.Attempts)
	require.Len(t, k.Recent, 2)
	require.Len(t, k.Recent[0].Triggers, 1)
	assert.Equal(t, "backoff", k.Recent[0].Triggers[0].Kind, "newest first")
	assert.Equal(t, reconcile.TriggerInitialList.String(), k.Recent[1].Triggers[0].Kind)
}

func TestTheKeyPageShouldShowTheKeysEventsEscapedInHTMLAndInJSON(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	code, body := getPage(t, m.DebugHandler(), keyPath("parked"), "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<td class="bad">Warning</td><td>FailedCreate</td>`)
	assert.Contains(t, body, "<td>2 since", "both failures counted into one event")
	assert.Contains(t, body, "<td>ints-controller</td><td>&lt;i&gt;exceeded quota&lt;/i&gt;</td>", "the message is text")
	assert.NotContains(t, body, "<i>")
	assert.NotContains(t, body, "Synced", "another key's event")

	code, body = getPage(t, m.DebugHandler(), keyPath("ok")+"?format=json", "")
	require.Equal(t, http.StatusOK, code)
	var k debugpage.KeyPage
	require.NoError(t, json.Unmarshal([]byte(body), &k))
	require.Len(t, k.Events, 1)
	assert.Equal(t, "Synced", k.Events[0].Reason)
	assert.Equal(t, events.Normal, k.Events[0].Type)
}

func TestTheKeyPageShouldShowNoValueUnlessShowValuesIsOn(t *testing.T) {
	for _, show := range []bool{false, true} {
		m, c := debugFixture(t, reconcile.DebugOptions{Enabled: true, ShowValues: show})
		code, body := getPage(t, m.DebugHandler(), keyPath("ok")+"?format=json", "")
		require.Equal(t, http.StatusOK, code)
		var k debugpage.KeyPage
		require.NoError(t, json.Unmarshal([]byte(body), &k))
		_, html := getPage(t, m.DebugHandler(), keyPath("ok"), "")
		info, _ := reconcile.InspectKey(c, "ok")
		if !show {
			assert.Nil(t, k.Value, "values are off by default")
			assert.NotContains(t, body, `"Value"`)
			assert.NotContains(t, html, "<h2>Value</h2>")
			assert.Nil(t, info.Value)
			continue
		}
		assert.Equal(t, float64(1), k.Value, "the For informer's value")
		assert.Contains(t, html, "<h2>Value</h2>\n<pre>1</pre>")
		assert.Equal(t, 1, info.Value)
	}
}

func TestTheKeyPageShouldCutALongErrorAndEscapeAKeyLikeAScript(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	code, body := getPage(t, m.DebugHandler(), keyPath("long"), "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "first 1024 of 3018 bytes")
	assert.NotContains(t, body, "<b>bold</b>")

	code, body = getPage(t, m.DebugHandler(), keyPath(scriptKey), "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "<h1>Key &lt;script&gt;alert(1)&lt;/script&gt;</h1>")
	assert.NotContains(t, body, "<script>")
	assert.NotContains(t, body, "<img")
}

func TestUnknownKeysAndControllersShouldBe404(t *testing.T) {
	m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true})
	for _, path := range []string{keyPath("nobody"), "/debug/converge/controllers/nope", "/debug/converge/controllers/nope/keys/ok"} {
		code, body := getPage(t, m.DebugHandler(), path, "")
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.NotContains(t, body, "<script", path)
	}
	code, _ := getPage(t, m.DebugHandler(), keyPath("ok"), "")
	assert.Equal(t, http.StatusOK, code, "a key that succeeded is among the recent reconciles")
}

func TestTheDebugPagesShouldRefuseRemoteClientsUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		m, _ := debugFixture(t, reconcile.DebugOptions{Enabled: true, AllowRemote: allow})
		req := httptest.NewRequest(http.MethodGet, "/debug/converge/", nil) // from 192.0.2.1
		w := httptest.NewRecorder()
		m.DebugHandler().ServeHTTP(w, req)
		want := http.StatusForbidden
		if allow {
			want = http.StatusOK
		}
		assert.Equal(t, want, w.Code, "AllowRemote=%v", allow)
		code, _ := getPage(t, m.DebugHandler(), "/debug/converge/", "")
		assert.Equal(t, http.StatusOK, code)
	}
}

func TestNewManagerShouldRejectDebugWithoutAnAddrOrWithASubSecondRefresh(t *testing.T) {
	_, err := reconcile.NewManager(reconcile.ManagerOptions{Debug: reconcile.DebugOptions{Enabled: true}})
	assert.ErrorContains(t, err, "Debug.Enabled needs Addr")
	_, err = reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Debug: reconcile.DebugOptions{Enabled: true, Refresh: time.Millisecond}})
	assert.ErrorContains(t, err, "Debug.Refresh")
}

func TestTheManagersServerShouldServeTheDebugPagesOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		store := must.Do(memstore.New[string, int]())
		inf := must.Do(informer.New[string, int]("ints", store, informer.WithLogger(quietLogger)))
		c, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(inf), quiet)
		require.NoError(t, err)
		m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Logger: quietLogger,
			Debug: reconcile.DebugOptions{Enabled: enabled}})
		require.NoError(t, err)
		require.NoError(t, m.AddInformer(inf))
		require.NoError(t, m.AddController(c))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		require.Eventually(t, func() bool { return m.Addr() != "" }, 10*time.Second, time.Millisecond)
		resp, err := http.Get("http://" + m.Addr() + "/debug/converge/controllers/c?format=json")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if enabled {
			assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			assert.Contains(t, string(body), `"Name": "c"`)
			// Once the (empty) initial list is delivered, so that "k"
			// arrives as a change, not in the initial list.
			require.Eventually(t, c.Idle, 10*time.Second, time.Millisecond)
			store.Put("k", 1)
			require.Eventually(t, func() bool { return inf.LastRevision() == 1 }, 10*time.Second, time.Millisecond)
			o := getOverview(t, m.Addr())
			require.Len(t, o.Informers, 1)
			assert.True(t, o.Informers[0].HeadKnown, "a memstore tells its head")
			assert.Equal(t, informer.Revision(1), o.Informers[0].Head)
			assert.Equal(t, informer.Revision(0), o.Informers[0].Lag)
			require.Eventually(t, func() bool { info, _ := reconcile.InspectKey(c, "k"); return len(info.Recent) == 1 }, 10*time.Second, time.Millisecond)
			info, _ := reconcile.InspectKey(c, "k")
			assert.Equal(t, []string{`informer "ints" added rev 1`}, kinds(info.Recent[0].Triggers), "reasons on with debug pages")
		} else {
			assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		}
		cancel()
		require.NoError(t, <-done)
	}
}

// getOverview fetches the overview's JSON from a running Manager.
func getOverview(t *testing.T, addr string) debugpage.Overview {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/converge/?format=json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var o debugpage.Overview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	return o
}
