package httpstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestNewClientShouldRefuseABadURLOrTokenWithAClearError(t *testing.T) {
	tests := []struct{ name, url, token, contains string }{
		{"empty", "", "", `scheme "", want http or https`},
		{"no scheme", "localhost:8080", "", `scheme "localhost", want http or https`},
		{"another scheme", "ftp://host/", "", `scheme "ftp"`},
		{"no host", "http:///keys", "", "has no host"},
		{"a query", "http://host/?a=1", "", "want no query"},
		{"unparsable", "http://[::1", "", "base URL"},
		{"a token with a space", "http://host", "a b", "token has a space"},
		{"a token with a newline", "http://host", "a\nb", "token has a space or a control character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httpstore.NewClient[int](tc.url, httpstore.ClientOptions{Token: tc.token})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.contains)
		})
	}
}

func TestGetShouldFailRatherThanReportAbsenceWhenTheURLIsNotAServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	c, err := httpstore.NewClient[int](srv.URL+"/wrong", httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)

	_, _, ok, err := c.Get(t.Context(), "a")

	assert.False(t, ok)
	var e *httpstore.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusNotFound, e.StatusCode)
	assert.Contains(t, err.Error(), "not an httpstore response")
	assert.Contains(t, err.Error(), srv.URL+"/wrong/keys")
}

func TestClientShouldWorkBelowAPathPrefix(t *testing.T) {
	m := must.Do(memstore.New[string, int]())
	mux := http.NewServeMux()
	mux.Handle("/api/store/", http.StripPrefix("/api/store", must.Do(httpstore.NewServer[int](m, httpstore.ServerOptions[int]{}))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := httpstore.NewClient[int](srv.URL+"/api/store/", httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)

	rev, err := c.Create(t.Context(), "a/b c?", 7)

	require.NoError(t, err)
	v, got, ok, err := c.Get(t.Context(), "a/b c?")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 7, v)
	assert.Equal(t, rev, got)
	_, _, ok, _ = m.Get(t.Context(), "a/b c?")
	assert.True(t, ok, "the key is the store's as the client spelled it")
}

func TestCancelledWatchShouldReturnAndLeaveNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	m := must.Do(memstore.New[string, int]())
	srv := httptest.NewServer(must.Do(httpstore.NewServer[int](m, httpstore.ServerOptions[int]{})))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c, err := httpstore.NewClient[int](srv.URL, httpstore.ClientOptions{HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan informer.Event[string, int], 1)
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, 0, func(e informer.Event[string, int]) error { got <- e; return nil })
	}()
	m.Put("a", 1)
	<-got // the stream is open

	cancel()

	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return 10s after its context was cancelled")
	}
	srv.Close() // waits for the server's handler, which must have ended too
	tr.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}
