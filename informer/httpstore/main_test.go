package httpstore_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/internal/must"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves store on loopback until t ends and returns a client of it
// with token, on an http.Client of its own whose idle connections are
// closed at the end, so that goleak sees no connection goroutine.
func serve[V any](t testing.TB, store informer.Store[string, V], opts httpstore.ServerOptions[V], token string) (*httpstore.Client[V], *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(must.Do(httpstore.NewServer(store, opts)))
	t.Cleanup(srv.Close)
	c, err := httpstore.NewClient[V](srv.URL, httpstore.ClientOptions{Token: token, HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)
	return c, srv
}

// newHTTPClient returns an http.Client with a transport of its own, whose
// idle connections are closed when t ends.
func newHTTPClient(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
