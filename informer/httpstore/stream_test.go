package httpstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestAnIdleWatchShouldGetABookmarkEveryInterval(t *testing.T) {
	m := must.Do(memstore.New[string, int]())
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	_, srv := serve[int](t, m, httpstore.ServerOptions[int]{Clock: clk, BookmarkInterval: time.Minute}, "")
	m.Put("a", 1)
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/watch?after=0", nil)
	require.NoError(t, err)
	resp, err := newHTTPClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	assert.JSONEq(t, `{"type":"PUT","key":"a","value":1,"revision":1}`, readLine(t, r))
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the stream's ticker")

	for range 2 {
		clk.Step(time.Minute)
		assert.JSONEq(t, `{"type":"BOOKMARK","revision":1}`, readLine(t, r))
	}
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	return line
}

// scripted is a memory store whose List and Watch report items with a
// negative N as values it cannot decode, as etcdstore does for bytes that
// are not an item, and whose Watch may fail after its events (failAfter).
type scripted struct {
	*memstore.Store[string, item]
	failAfter error
}

func (s *scripted) List(ctx context.Context) ([]informer.Entry[string, item], informer.Revision, error) {
	es, rev, err := s.Store.List(ctx)
	for i := range es {
		if es[i].Value.N < 0 {
			es[i].Value, es[i].Err = item{}, fmt.Errorf("cannot decode %d", es[i].Value.N)
		}
	}
	return es, rev, err
}

func (s *scripted) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, item]) error) error {
	err := s.Store.Watch(ctx, after, func(e informer.Event[string, item]) error {
		if e.Type == informer.Put && e.Value.N < 0 {
			e.Value, e.Err = item{}, fmt.Errorf("cannot decode %d", e.Value.N)
		}
		if err := emit(e); err != nil {
			return err
		}
		if s.failAfter != nil {
			return s.failAfter
		}
		return nil
	})
	return err
}

func TestValuesTheServersStoreCannotDecodeShouldArriveAsBadEntriesAndEvents(t *testing.T) {
	s := &scripted{Store: must.Do(memstore.New[string, item]())}
	s.Put("bad", item{N: -1})
	s.Put("good", item{N: 1})
	c, _ := serve[item](t, s, httpstore.ServerOptions[item]{}, "")

	entries, rev, err := c.List(t.Context())

	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.Equal(t, "bad", entries[0].Key)
	assert.ErrorContains(t, entries[0].Err, "cannot decode -1")
	assert.Equal(t, informer.Revision(1), entries[0].Revision)
	assert.Equal(t, informer.Entry[string, item]{Key: "good", Value: item{N: 1}, Revision: 2}, entries[1])

	s.Put("good", item{N: -2})
	s.Put("good", item{N: 3})
	var events []informer.Event[string, item]
	ctx, cancel := context.WithCancel(t.Context())
	err = c.Watch(ctx, rev, func(e informer.Event[string, item]) error {
		events = append(events, e)
		if len(events) == 2 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, events, 2)
	assert.ErrorContains(t, events[0].Err, "cannot decode -2")
	assert.Equal(t, informer.Event[string, item]{Type: informer.Put, Key: "good", Revision: 3, Err: events[0].Err}, events[0])
	assert.Equal(t, informer.Event[string, item]{Type: informer.Put, Key: "good", Value: item{N: 3}, Revision: 4}, events[1])
}

func TestAWatchThatExpiresAfterItsFirstEventShouldReturnErrRevisionExpired(t *testing.T) {
	s := &scripted{Store: must.Do(memstore.New[string, item]()), failAfter: fmt.Errorf("fell behind: %w", informer.ErrRevisionExpired)}
	s.Put("a", item{N: 1})
	c, _ := serve[item](t, s, httpstore.ServerOptions[item]{}, "")
	var events []informer.Event[string, item]

	err := c.Watch(t.Context(), 0, func(e informer.Event[string, item]) error { events = append(events, e); return nil })

	require.ErrorIs(t, err, informer.ErrRevisionExpired)
	assert.ErrorContains(t, err, "fell behind")
	var e *httpstore.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusGone, e.StatusCode)
	assert.Len(t, events, 1, "the event before the expiry")
}

func TestAnEndedStreamShouldBeAnErrorThatIsNotAnExpiry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "PUT", "key": "a", "value": 1, "revision": 5})
	}))
	t.Cleanup(srv.Close)
	c, err := httpstore.NewClient[int](srv.URL, httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)
	var last informer.Revision

	err = c.Watch(t.Context(), 0, func(e informer.Event[string, int]) error { last = e.Revision; return nil })

	require.Error(t, err)
	assert.False(t, errors.Is(err, informer.ErrRevisionExpired))
	assert.ErrorContains(t, err, "the server ended the stream after revision 5")
	assert.Equal(t, informer.Revision(5), last)
}

func TestAWatchShouldFailWhenTheServerSendsNothingForTheIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select { // a server that hangs: no line, no bookmark
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c, err := httpstore.NewClient[int](srv.URL, httpstore.ClientOptions{HTTPClient: newHTTPClient(t), IdleTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	err = c.Watch(ctx, 0, func(informer.Event[string, int]) error { return nil })

	require.NoError(t, ctx.Err(), "the watch ended by itself")
	assert.ErrorContains(t, err, "no line from the server for 20ms")
	assert.NotErrorIs(t, err, informer.ErrRevisionExpired)
}

// bookmarking is a store whose Watch sends one bookmark, 5 revisions on,
// and then waits.
type bookmarking struct{ *memstore.Store[string, int] }

func (s bookmarking) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	if err := emit(informer.Event[string, int]{Type: informer.Bookmark, Revision: after + 5}); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestTheStoresBookmarksShouldReachTheClient(t *testing.T) {
	c, _ := serve[int](t, bookmarking{must.Do(memstore.New[string, int]())}, httpstore.ServerOptions[int]{}, "")
	ctx, cancel := context.WithCancel(t.Context())
	var got []informer.Event[string, int]

	err := c.Watch(ctx, 2, func(e informer.Event[string, int]) error { got = append(got, e); cancel(); return nil })

	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []informer.Event[string, int]{{Type: informer.Bookmark, Revision: 7}}, got)
}

// watchEnds is a memory store that reports when a Watch of it returns.
type watchEnds struct {
	*memstore.Store[string, string]
	ended chan error
}

func (s watchEnds) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, string]) error) error {
	err := s.Store.Watch(ctx, after, emit)
	s.ended <- err
	return err
}

func TestAWatchWhoseClientStopsReadingShouldEndAfterTheWriteTimeout(t *testing.T) {
	s := watchEnds{must.Do(memstore.New[string, string]()), make(chan error, 1)}
	_, srv := serve[string](t, s, httpstore.ServerOptions[string]{WatchWriteTimeout: 50 * time.Millisecond}, "")
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /watch?after=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	big := strings.Repeat("x", 1<<16)

	// More than loopback's socket buffers hold, to a client that reads
	// nothing: the server's writes block until the timeout fails them.
	for i := range 400 {
		s.Put("k"+strconv.Itoa(i), big)
	}

	select {
	case err := <-s.ended:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the store's Watch still runs 10s after its client stopped reading")
	}
}
