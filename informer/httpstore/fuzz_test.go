package httpstore_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// bodyTransport answers every request with status and body, without a
// network.
type bodyTransport struct {
	status int
	body   []byte
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: b.status, Body: io.NopCloser(bytes.NewReader(b.body)), Request: r, Header: http.Header{}}, nil
}

// Whatever a watch response holds, the client returns an error (the stream
// ends), never panics, and emits only events whose revisions never go back.
func FuzzWatchStream(f *testing.F) {
	f.Add(200, []byte(`{"type":"PUT","key":"a","value":1,"revision":1}`+"\n"+`{"type":"BOOKMARK","revision":3}`+"\n"))
	f.Add(200, []byte(`{"type":"DELETE","key":"a","value":"x","revision":2}`+"\n"+`{"type":"ERROR","code":"Expired"}`+"\n"))
	f.Add(410, []byte(`{"code":"Expired","message":"gone"}`))
	f.Add(200, []byte(`{"type":"PUT","key":"a","error":"bad"}`+"\n{"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		c, err := httpstore.NewClient[int]("http://fuzz", httpstore.ClientOptions{HTTPClient: &http.Client{Transport: bodyTransport{status, body}}})
		if err != nil {
			t.Fatal(err)
		}
		var last informer.Revision
		err = c.Watch(context.Background(), 0, func(e informer.Event[string, int]) error {
			if e.Type == informer.Bookmark && e.Revision <= last {
				t.Fatalf("bookmark at %d after %d", e.Revision, last)
			}
			last = max(last, e.Revision)
			return nil
		})
		if err == nil {
			t.Fatal("Watch returned nil at the end of its stream")
		}
	})
}

// Whatever request comes, the server answers with a status of the protocol
// and never panics; a refused write changes nothing.
func FuzzServerRequest(f *testing.F) {
	f.Add("POST", "/keys?key=a", []byte(`1`), "rw")
	f.Add("PUT", "/keys?key=a&revision=1", []byte(`2`), "ro")
	f.Add("DELETE", "/keys?key=a&revision=x", []byte(nil), "rw")
	f.Add("GET", "/keys", []byte(nil), "")
	f.Fuzz(func(t *testing.T, method, target string, body []byte, token string) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		req, err := http.NewRequest(method, "http://fuzz"+target, bytes.NewReader(body))
		if err != nil || req.URL.Path == "/watch" { // a watch waits for changes
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		m := must.Do(memstore.New[string, int]())
		rev := m.Put("a", 1)
		s := must.Do(httpstore.NewServer[int](m, httpstore.ServerOptions[int]{
			Tokens:       map[string]httpstore.Access{"ro": httpstore.ReadOnly, "rw": httpstore.ReadWrite},
			MaxBodyBytes: 16,
		}))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		switch w.Code {
		case 200:
		case 400, 401, 403, 404, 405, 409, 410, 413, 422, 500, 503:
			if m.Revision() != rev {
				t.Fatalf("status %d, but the store changed", w.Code)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}
