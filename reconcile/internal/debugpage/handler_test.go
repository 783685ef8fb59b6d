package debugpage

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

var quiet = slog.New(slog.DiscardHandler)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeSite is a Site of one controller whose parked keys are a set.
type fakeSite struct{ c *fakeController }

func (s fakeSite) Controllers() []Controller { return []Controller{s.c} }
func (fakeSite) Informers(context.Context) []InformerInfo {
	return []InformerInfo{{Name: "things", Synced: true}}
}
func (fakeSite) Leader() *leader.Status  { return nil }
func (fakeSite) Sharding() *shard.Status { return nil }
func (fakeSite) Now() time.Time          { return now }

type fakeController struct{ parked map[string]bool }

func (*fakeController) Name() string { return "things" }
func (c *fakeController) Info() ControllerInfo {
	info := ControllerInfo{Name: "things", Running: true, Workers: 1}
	for k := range c.parked {
		info.Parked = append(info.Parked, KeyLine{Key: k, Attempts: 3, Parked: true})
	}
	info.ParkedTotal = len(info.Parked)
	return info
}
func (c *fakeController) Key(k string) (KeyInfo, bool) {
	if !c.parked[k] {
		return KeyInfo{}, false
	}
	return KeyInfo{Key: k, Phase: "absent", Parked: true, Attempts: 3,
		Recent: []ReconcileLine{{ReconcileID: "7", Result: "error", Triggers: []Trigger{{Kind: "backoff", Count: 1, Text: "backoff"}}}}}, true
}
func (c *fakeController) Unpark(k string) bool {
	was := c.parked[k]
	delete(c.parked, k)
	return was
}
func (c *fakeController) UnparkAll() int {
	n := len(c.parked)
	clear(c.parked)
	return n
}
func (*fakeController) Now() time.Time { return now }

func serve(h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr, req.Host = "127.0.0.1:40000", "localhost:8081"
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestTheHandlerShouldServeEveryPageOfASiteInHTMLAndJSON(t *testing.T) {
	h := Handler(fakeSite{&fakeController{parked: map[string]bool{"a/b": true}}}, Options{Refresh: 2 * time.Second, Logger: quiet})
	for _, path := range []string{Root, Root + "controllers/things", Root + "controllers/things/keys/a%2Fb"} {
		w := serve(h, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, w.Code, path)
		assert.Contains(t, w.Header().Get("Content-Type"), "text/html", path)
		assert.Contains(t, w.Body.String(), `http-equiv="refresh" content="2"`, path)
		assert.Contains(t, w.Body.String(), "things", path)
		if path != Root {
			assert.Contains(t, w.Body.String(), "a/b", path)
		}
	}
	w := serve(h, http.MethodGet, Root+"controllers/things/keys/a%2Fb?format=json", nil)
	require.Equal(t, http.StatusOK, w.Code)
	var k KeyPage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &k))
	assert.Equal(t, "things", k.Controller)
	assert.Equal(t, "a/b", k.Key)
	assert.True(t, k.Parked)
	assert.NotContains(t, w.Body.String(), `"Text"`, "a trigger's text is its fields again, not a field of its own")

	w = serve(h, http.MethodGet, Root+"?format=json", nil)
	var o Overview
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
	require.Len(t, o.Controllers, 1)
	assert.Equal(t, 1, o.Controllers[0].ParkedTotal)
	assert.Equal(t, []InformerInfo{{Name: "things", Synced: true}}, o.Informers)
	assert.Equal(t, now, o.Now)
	assert.NotContains(t, w.Body.String(), `"Leader"`, "no election: no leader shown")
}

func TestTheUnparkButtonsShouldUnparkThroughTheSiteAndRefuseOtherSites(t *testing.T) {
	c := &fakeController{parked: map[string]bool{"a": true, "b": true, "c": true}}
	h := Handler(fakeSite{c}, Options{Logger: quiet})

	w := serve(h, http.MethodPost, Root+"controllers/things/unpark/a", map[string]string{"Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, w.Code, "a POST from another site")
	assert.True(t, c.parked["a"], "still parked")

	w = serve(h, http.MethodPost, Root+"controllers/things/unpark/a", nil)
	assert.Equal(t, http.StatusSeeOther, w.Code)
	assert.Equal(t, Root+"controllers/things/keys/a", w.Header().Get("Location"))
	assert.False(t, c.parked["a"])

	w = serve(h, http.MethodPost, Root+"controllers/things/unpark/a?format=json", nil)
	assert.Equal(t, http.StatusConflict, w.Code, "not parked any more")
	assert.Contains(t, w.Body.String(), `"Error"`)

	w = serve(h, http.MethodPost, Root+"controllers/things/unpark-all?format=json", nil)
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"Unparked": 2}`, w.Body.String())
	assert.Empty(t, c.parked)

	w = serve(h, http.MethodGet, Root+"controllers/nope?format=json", nil)
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func TestTheHandlerShouldAnswerRemoteClientsOnlyWhenAllowed(t *testing.T) {
	site := fakeSite{&fakeController{parked: map[string]bool{}}}
	for allow, want := range map[bool]int{false: http.StatusForbidden, true: http.StatusOK} {
		req := httptest.NewRequest(http.MethodGet, Root, nil)
		req.RemoteAddr, req.Host = "192.0.2.1:40000", "converge.example"
		w := httptest.NewRecorder()
		Handler(site, Options{AllowRemote: allow}).ServeHTTP(w, req)
		assert.Equal(t, want, w.Code, "AllowRemote %v", allow)
	}
}

func TestErrorTextShouldCutLongMessagesOnARuneBoundary(t *testing.T) {
	long := strings.Repeat("é", MaxErrorBytes) // 2 bytes a rune
	s, n := ErrorText(errString(long))
	assert.Equal(t, long[:MaxErrorBytes], s)
	assert.Equal(t, 2*MaxErrorBytes, n)
	s, n = ErrorText(errString("x" + long))
	assert.Equal(t, "x"+long[:MaxErrorBytes-2], s, "the rune across the bound is dropped whole")
	assert.Equal(t, 2*MaxErrorBytes+1, n)
	s, n = ErrorText(nil)
	assert.Empty(t, s)
	assert.Zero(t, n)
}

type errString string

func (e errString) Error() string { return string(e) }
