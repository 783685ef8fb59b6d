package reconcile_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// parkedFixture is a controller whose keys "a" and "b" fail while blocked
// is set, parked after 2 attempts, and a Manager with debug pages over it.
type parkedFixture struct {
	h       *reconciletest.Harness
	c       *reconcile.Controller[string]
	m       *reconcile.Manager
	rec     *recorder
	blocked atomic.Bool
}

func newParkedFixture(t *testing.T) *parkedFixture {
	t.Helper()
	f := &parkedFixture{h: reconciletest.New(t)}
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	store.Put("b", 1)
	f.rec = newRecorder(store)
	f.blocked.Store(true)
	f.rec.outcome = func(string, int) (reconcile.Result, error) {
		if f.blocked.Load() {
			return reconcile.Result{}, errors.New("the outside service is down")
		}
		return reconcile.Result{}, nil
	}
	inf := reconciletest.Informer(f.h, "ints", store)
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Hour})
	f.c = reconciletest.Controller(f.h, "ints", f.rec, reconcile.For(inf), reconcile.WithMaxAttempts(2),
		reconcile.WithRateLimiter(limiter), quiet)
	f.h.Settle()
	f.h.Step(time.Second)
	require.ElementsMatch(t, []string{"a", "b"}, f.c.Parked(), "precondition: both parked")
	var err error
	f.m, err = reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Debug: reconcile.DebugOptions{Enabled: true}, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, f.m.AddInformer(inf))
	require.NoError(t, f.m.AddController(f.c))
	return f
}

func (f *parkedFixture) calls(key string) int {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return len(f.rec.seen[key])
}

func TestUnparkShouldRetryAParkedKeyAtOnceWithoutAChange(t *testing.T) {
	f := newParkedFixture(t)
	f.h.Step(time.Hour)
	require.Equal(t, 2, f.calls("a"), "precondition: a parked key is not retried")

	f.blocked.Store(false) // the cause outside the store is fixed
	assert.True(t, f.c.Unpark("a"))
	f.h.Settle()
	assert.Equal(t, 3, f.calls("a"), "retried at once")
	_, failing := f.c.Status("a")
	assert.False(t, failing, "and it succeeded")
	assert.Equal(t, []string{"b"}, f.c.Parked(), "the other stays parked")
	assert.False(t, f.c.Unpark("a"), "a key that is not parked")
	assert.False(t, f.c.Unpark("nobody"))
}

func TestUnparkAllShouldRetryEveryParkedKey(t *testing.T) {
	f := newParkedFixture(t)
	f.blocked.Store(false)
	assert.Equal(t, 2, f.c.UnparkAll())
	f.h.Settle()
	assert.Empty(t, f.c.Parked())
	assert.Equal(t, 3, f.calls("a"))
	assert.Equal(t, 3, f.calls("b"))
	assert.Equal(t, 0, f.c.UnparkAll())
}

func TestAnUnparkedKeyThatFailsAgainShouldGetItsAttemptsAfresh(t *testing.T) {
	f := newParkedFixture(t)
	require.True(t, f.c.Unpark("a"))
	f.h.Settle()
	st, _ := f.c.Status("a")
	assert.Equal(t, 1, st.Attempts, "a fresh start")
	assert.False(t, st.Parked)
	f.h.Step(time.Hour)
	st, _ = f.c.Status("a")
	assert.True(t, st.Parked, "parked again after WithMaxAttempts more")
}

// post sends a POST to the debug pages as a loopback client, with the
// given headers, and returns the response.
func post(t *testing.T, h http.Handler, path string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Host = "127.0.0.1:8081"
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestTheKeyPageShouldUnparkTheKeyOnASameOriginPost(t *testing.T) {
	f := newParkedFixture(t)
	h := f.m.DebugHandler()
	_, body := getPage(t, h, "/debug/converge/controllers/ints/keys/a", "")
	assert.Contains(t, body, `<form method="post" action="/debug/converge/controllers/ints/unpark/a">`, "the page has a button")
	_, body = getPage(t, h, "/debug/converge/controllers/ints", "")
	assert.Contains(t, body, `<form method="post" action="/debug/converge/controllers/ints/unpark-all">`)

	w := post(t, h, "/debug/converge/controllers/ints/unpark/a",
		map[string]string{"Origin": "http://127.0.0.1:8081", "Sec-Fetch-Site": "same-origin"})
	assert.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	assert.Equal(t, "/debug/converge/controllers/ints/keys/a", w.Header().Get("Location"))
	assert.Equal(t, []string{"b"}, f.c.Parked())

	w = post(t, h, "/debug/converge/controllers/ints/unpark-all?format=json", nil) // curl: no Origin
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"Unparked": 1}`, w.Body.String())
	assert.Empty(t, f.c.Parked())
}

func TestACrossSitePostShouldNotUnpark(t *testing.T) {
	f := newParkedFixture(t)
	h := f.m.DebugHandler()
	for name, header := range map[string]map[string]string{
		"a cross-site form":           {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
		"an old browser's cross form": {"Origin": "https://evil.example"},
	} {
		w := post(t, h, "/debug/converge/controllers/ints/unpark/"+url.PathEscape("a"), header)
		assert.Equal(t, http.StatusForbidden, w.Code, name)
	}
	req := httptest.NewRequest(http.MethodPost, "/debug/converge/controllers/ints/unpark-all", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Host = "evil.example" // DNS rebinding: same origin to the browser
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.ElementsMatch(t, []string{"a", "b"}, f.c.Parked(), "nothing unparked")
	w = post(t, h, "/debug/converge/controllers/ints/unpark/nobody?format=json", nil)
	assert.Equal(t, http.StatusConflict, w.Code, "a key that is not parked")
}
