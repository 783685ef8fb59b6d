package httpstore_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// restartable serves a store on one loopback address, across restarts.
type restartable struct {
	t    *testing.T
	addr string
	h    http.Handler
	srv  *httptest.Server
}

func newRestartable(t *testing.T, h http.Handler) *restartable {
	r := &restartable{t: t, h: h}
	r.start("127.0.0.1:0")
	r.addr = r.srv.Listener.Addr().String()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *restartable) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(r.t, err)
	r.srv = httptest.NewUnstartedServer(r.h)
	r.srv.Listener = ln
	r.srv.Start()
}

// stop ends the server and every connection to it, watches included.
func (r *restartable) stop() {
	if r.srv != nil {
		r.srv.CloseClientConnections()
		r.srv.Close()
		r.srv = nil
	}
}

func TestAWatchShouldResumeAfterItsLastRevisionOnARestartedServer(t *testing.T) {
	m := must.Do(memstore.New[string, int]())
	srv := newRestartable(t, must.Do(httpstore.NewServer[int](m, httpstore.ServerOptions[int]{})))
	c, err := httpstore.NewClient[int]("http://"+srv.addr, httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)
	m.Put("a", 1)
	var last informer.Revision
	done := make(chan error, 1)
	got := make(chan struct{})
	go func() {
		done <- c.Watch(t.Context(), 0, func(e informer.Event[string, int]) error {
			last = e.Revision
			close(got)
			return nil
		})
	}()
	<-got

	srv.stop()
	err = <-done
	require.Error(t, err)
	assert.NotErrorIs(t, err, informer.ErrRevisionExpired)
	assert.NotErrorIs(t, err, context.Canceled)
	require.Equal(t, informer.Revision(1), last)
	m.Put("b", 2) // while the server is down
	_, err = m.Delete(t.Context(), "a", 0)
	require.NoError(t, err)
	srv.start(srv.addr)

	var events []informer.Event[string, int]
	ctx, cancel := context.WithCancel(t.Context())
	err = c.Watch(ctx, last, func(e informer.Event[string, int]) error {
		events = append(events, e)
		if len(events) == 2 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []informer.Event[string, int]{
		{Type: informer.Put, Key: "b", Value: 2, Revision: 2},
		{Type: informer.Delete, Key: "a", Value: 1, Revision: 3},
	}, events)
}

func TestAnInformerShouldFollowAServerThroughARestartWithoutRelisting(t *testing.T) {
	m := must.Do(memstore.New[string, int]())
	srv := newRestartable(t, must.Do(httpstore.NewServer[int](m, httpstore.ServerOptions[int]{})))
	c, err := httpstore.NewClient[int]("http://"+srv.addr, httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)
	inf := must.Do(informer.New[string, int]("served", c,
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Millisecond, Cap: 20 * time.Millisecond})))
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	require.NoError(t, inf.WaitForRevision(ctx, m.Put("a", 0)))
	// A change after the list comes through the watch: it is connected.
	require.NoError(t, inf.WaitForRevision(ctx, m.Put("a", 1)))

	srv.stop()
	m.Put("b", 2)
	rev, err := m.Delete(t.Context(), "a", 0)
	require.NoError(t, err)
	srv.start(srv.addr)

	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	require.NoError(t, inf.WaitForRevision(wait, rev))
	_, ok := inf.Get("a")
	assert.False(t, ok)
	v, _ := inf.Get("b")
	assert.Equal(t, 2, v)
	st := inf.Stats()
	assert.Equal(t, uint64(1), st.Lists, "it resumed its watch rather than relisting")
	assert.NotZero(t, st.WatchErrors)
	assert.Zero(t, st.Expired)
}
