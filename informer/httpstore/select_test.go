package httpstore_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
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

// bound is a pod-like value: the node it is bound to.
type bound struct {
	Node string `json:"node"`
}

// byNode selects the values bound to the node a "node=NAME" selector names.
func byNode(selector string) (func(string, bound) bool, error) {
	node, ok := strings.CutPrefix(selector, "node=")
	if !ok {
		return nil, fmt.Errorf("want node=NAME")
	}
	return func(_ string, v bound) bool { return v.Node == node }, nil
}

// selectedClient serves m with byNode and returns a client selecting node.
func selectedClient(t *testing.T, m informer.Store[string, bound], opts httpstore.ServerOptions[bound], node string) *httpstore.Client[bound] {
	t.Helper()
	opts.Select = byNode
	_, srv := serve[bound](t, m, opts, "")
	c, err := httpstore.NewClient[bound](srv.URL, httpstore.ClientOptions{HTTPClient: newHTTPClient(t), Selector: "node=" + node})
	require.NoError(t, err)
	return c
}

// seen is an event as a test compares it: "PUT a n1", "DELETE a".
func seen(e informer.Event[string, bound]) string {
	switch e.Type {
	case informer.Put:
		return fmt.Sprintf("PUT %s %s", e.Key, e.Value.Node)
	case informer.Delete:
		return "DELETE " + e.Key
	}
	return "BOOKMARK"
}

// watching watches c after rev until t ends and returns what it sends,
// bookmarks left out.
func watching(t *testing.T, c *httpstore.Client[bound], after informer.Revision) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Watch(ctx, after, func(e informer.Event[string, bound]) error {
			if e.Type != informer.Bookmark {
				out <- seen(e)
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// until returns what ch sends up to and including last.
func until(t *testing.T, ch <-chan string, last string) []string {
	t.Helper()
	var got []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-ch:
			got = append(got, e)
			if e == last {
				return got
			}
		case <-timeout:
			require.FailNow(t, "no "+last, "the watch sent %q", got)
		}
	}
}

func TestASelectedListShouldHoldTheSelectedEntriesOnly(t *testing.T) {
	m := must.Do(memstore.New[string, bound]())
	m.Put("a", bound{"n1"})
	m.Put("b", bound{"n2"})
	m.Put("c", bound{"n1"})
	c := selectedClient(t, m, httpstore.ServerOptions[bound]{}, "n1")

	entries, rev, err := c.List(t.Context())

	require.NoError(t, err)
	assert.Equal(t, m.Revision(), rev, "the store's revision, not the last selected entry's")
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []string{"a", "c"}, keys)
}

func TestASelectedWatchShouldSendSelectedWritesAndADeleteWhenAKeyLeavesTheSelection(t *testing.T) {
	m := must.Do(memstore.New[string, bound]())
	c := selectedClient(t, m, httpstore.ServerOptions[bound]{}, "n1")
	_, start, err := c.List(t.Context())
	require.NoError(t, err)
	events := watching(t, c, start)
	m.Put("ready", bound{"n1"})
	require.Equal(t, []string{"PUT ready n1"}, until(t, events, "PUT ready n1"), "the watch has started")
	m.Put("a", bound{"n1"}) // enters
	m.Put("b", bound{"n2"}) // never selected: nothing
	m.Put("a", bound{"n2"}) // rebound elsewhere: leaves
	m.Put("b", bound{"n1"}) // enters
	_, err = m.Delete(t.Context(), "b", 0)
	require.NoError(t, err) // a selected key deleted
	_, err = m.Delete(t.Context(), "a", 0)
	require.NoError(t, err) // a key not selected deleted: nothing
	m.Put("end", bound{"n1"})

	got := until(t, events, "PUT end n1")

	assert.Equal(t, []string{"PUT a n1", "DELETE a", "PUT b n1", "DELETE b", "PUT end n1"}, got)
}

func TestASelectedWatchResumedAfterARevisionShouldLeaveTheClientHoldingTheSelection(t *testing.T) {
	m := must.Do(memstore.New[string, bound]())
	m.Put("a", bound{"n1"})
	m.Put("b", bound{"n2"})
	m.Put("gone", bound{"n1"})
	resumeAt := m.Revision() // the client holds a and gone
	m.Put("a", bound{"n2"})  // a leaves
	m.Put("b", bound{"n1"})  // b enters
	m.Put("c", bound{"n2"})  // c, never selected, written twice
	m.Put("c", bound{"n2"})
	_, err := m.Delete(t.Context(), "gone", 0)
	require.NoError(t, err)
	m.Put("end", bound{"n1"})
	c := selectedClient(t, m, httpstore.ServerOptions[bound]{}, "n1")

	got := until(t, watching(t, c, resumeAt), "PUT end n1")

	held := map[string]bool{"a": true, "gone": true}
	for _, e := range got {
		op, key, _ := strings.Cut(e, " ")
		key, _, _ = strings.Cut(key, " ")
		held[key] = op == "PUT"
		if !held[key] {
			delete(held, key)
		}
	}
	assert.Equal(t, map[string]bool{"b": true, "end": true}, held, "the client holds the selected keys after %q", got)
	assert.Equal(t, []string{"DELETE a", "PUT b n1", "DELETE c", "DELETE gone", "PUT end n1"}, got,
		"a key whose membership at the resumed revision is unknown gets one DELETE at most")
}

func TestAnInformerOverASelectedClientShouldHoldTheSelectedKeysAsTheyMove(t *testing.T) {
	m := must.Do(memstore.New[string, bound]())
	m.Put("a", bound{"n1"})
	m.Put("b", bound{"n2"})
	c := selectedClient(t, m, httpstore.ServerOptions[bound]{}, "n1")
	inf := must.Do(informer.New[string, bound]("selected", c))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.NoError(t, inf.WaitForSync(ctx))
	require.Equal(t, 1, inf.Len())

	m.Put("a", bound{"n2"})
	m.Put("b", bound{"n1"})
	m.Put("c", bound{"n3"})
	require.NoError(t, inf.WaitForRevision(ctx, m.Put("end", bound{"n1"})))

	var keys []string
	for _, e := range inf.List() {
		keys = append(keys, e.Key)
	}
	assert.ElementsMatch(t, []string{"b", "end"}, keys)
}

func TestASelectedWatchWhoseWritesAreAllLeftOutShouldBookmarkTheirRevision(t *testing.T) {
	m := must.Do(memstore.New[string, bound]())
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	_, srv := serve[bound](t, m, httpstore.ServerOptions[bound]{Clock: clk, BookmarkInterval: time.Minute, Select: byNode}, "")
	m.Put("a", bound{"n1"})
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/watch?after=0&selector=node%3Dn1", nil)
	require.NoError(t, err)
	resp, err := newHTTPClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	assert.JSONEq(t, `{"type":"PUT","key":"a","value":{"node":"n1"},"revision":1}`, readLine(t, r))
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the stream's ticker")
	m.Put("b", bound{"n2"})
	last := m.Put("b", bound{"n3"})
	// The store hands the watch its events asynchronously: step the clock
	// until a bookmark carries the last revision.
	for {
		clk.Step(time.Minute)
		line := readLine(t, r)
		require.Contains(t, line, `"BOOKMARK"`, "only bookmarks: b is never selected")
		if line == fmt.Sprintf(`{"type":"BOOKMARK","revision":%d}`+"\n", last) {
			return
		}
	}
}

func TestASelectorShouldBeRefusedWith400ByAServerThatCannotTakeIt(t *testing.T) {
	m := must.Do(memstore.New[string, bound]())
	_, plain := serve[bound](t, m, httpstore.ServerOptions[bound]{}, "")
	_, selecting := serve[bound](t, m, httpstore.ServerOptions[bound]{Select: byNode}, "")
	for name, tc := range map[string]struct{ url, selector, message string }{
		"no Select":    {plain.URL, "node=n1", "this server takes no selector"},
		"Select fails": {selecting.URL, "zone=z1", "want node=NAME"},
	} {
		t.Run(name, func(t *testing.T) {
			c := must.Do(httpstore.NewClient[bound](tc.url, httpstore.ClientOptions{HTTPClient: newHTTPClient(t), Selector: tc.selector}))
			_, _, err := c.List(t.Context())
			var he *httpstore.Error
			require.ErrorAs(t, err, &he)
			assert.Equal(t, http.StatusBadRequest, he.StatusCode)
			assert.Contains(t, he.Message, tc.message)
			err = c.Watch(t.Context(), 0, func(informer.Event[string, bound]) error { return nil })
			require.ErrorAs(t, err, &he)
			assert.Equal(t, http.StatusBadRequest, he.StatusCode)
		})
	}
}
