package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
)

func boundPod(name, node string) api.Pod {
	return api.Pod{Metadata: api.Metadata{Namespace: "default", Name: name}, Spec: api.PodSpec{NodeName: node}}
}

// put writes p to the stores under the server, as the scheduler's bind
// does, and returns the write's revision.
func (f *fixture) put(t *testing.T, p api.Pod) informer.Revision {
	t.Helper()
	key := p.Key()
	_, rev, ok, err := f.raw.Pods.Get(t.Context(), key)
	require.NoError(t, err)
	if !ok {
		rev, err = f.raw.Pods.Create(t.Context(), key, p)
	} else {
		rev, err = f.raw.Pods.Update(t.Context(), key, p, rev)
	}
	require.NoError(t, err)
	return rev
}

// nodePods is the store protocol's pod client of node's agent.
func (f *fixture) nodePods(t *testing.T, node string) informer.Store[string, api.Pod] {
	t.Helper()
	st, err := NewNodeStores(f.srv.URL, "ro", node, httpstore.ClientOptions{})
	require.NoError(t, err)
	return st.Pods
}

// podEvents watches pods after rev until t ends and sends "PUT key" and
// "DELETE key" for what the watch sends.
func podEvents(t *testing.T, pods informer.Store[string, api.Pod], after informer.Revision) <-chan string {
	ctx, cancel := context.WithCancel(t.Context())
	out := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = pods.Watch(ctx, after, func(e informer.Event[string, api.Pod]) error {
			switch e.Type {
			case informer.Put:
				out <- "PUT " + e.Key
			case informer.Delete:
				out <- "DELETE " + e.Key
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// upTo returns what ch sends, up to and including last.
func upTo(t *testing.T, ch <-chan string, last string) []string {
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

func TestAPodListWithANodeFieldSelectorShouldHoldThatNodesPodsOnly(t *testing.T) {
	f := newFixture(t)
	f.put(t, boundPod("a", "n1"))
	f.put(t, boundPod("b", "n2"))
	f.put(t, boundPod("c", ""))

	entries, _, err := f.nodePods(t, "n1").List(t.Context())
	require.NoError(t, err)
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []string{"default/a"}, keys, "the store protocol's list")

	code, body := f.do(t, "GET", "/api/v1/pods?fieldSelector="+url.QueryEscape("spec.nodeName=n2"), "ro", "")
	require.Equal(t, http.StatusOK, code)
	items, _ := body["items"].([]any)
	require.Len(t, items, 1, "the REST list")
	assert.Equal(t, "b", items[0].(map[string]any)["metadata"].(map[string]any)["name"])
}

func TestAPodWatchWithANodeFieldSelectorShouldGetADeleteWhenItsPodIsReboundOrDeleted(t *testing.T) {
	f := newFixture(t)
	pods := f.nodePods(t, "n1")
	_, start, err := pods.List(t.Context())
	require.NoError(t, err)
	events := podEvents(t, pods, start)
	f.put(t, boundPod("ready", "n1"))
	require.Equal(t, []string{"PUT default/ready"}, upTo(t, events, "PUT default/ready"))

	f.put(t, boundPod("a", "n1"))
	f.put(t, boundPod("b", "n2")) // another node's: nothing
	f.put(t, boundPod("a", "n2")) // rebound elsewhere
	f.put(t, boundPod("c", "n1"))
	_, err = f.client.Pods.Delete(t.Context(), "default/c", 0)
	require.NoError(t, err)
	f.put(t, boundPod("end", "n1"))

	assert.Equal(t, []string{"PUT default/a", "DELETE default/a", "PUT default/c", "DELETE default/c", "PUT default/end"},
		upTo(t, events, "PUT default/end"))
}

func TestAPodWatchWithANodeFieldSelectorShouldResumeAfterARevision(t *testing.T) {
	f := newFixture(t)
	f.put(t, boundPod("a", "n1"))
	f.put(t, boundPod("b", "n1"))
	resumeAt := f.put(t, boundPod("c", "n2")) // the agent holds a and b
	f.put(t, boundPod("a", "n2"))
	_, err := f.client.Pods.Delete(t.Context(), "default/b", 0)
	require.NoError(t, err)
	f.put(t, boundPod("c", "n1"))
	f.put(t, boundPod("end", "n1"))

	got := upTo(t, podEvents(t, f.nodePods(t, "n1"), resumeAt), "PUT default/end")

	assert.Equal(t, []string{"DELETE default/a", "DELETE default/b", "PUT default/c", "PUT default/end"}, got)
}

func TestARESTPodWatchWithANodeFieldSelectorShouldSendAddedAndDeletedAsPodsEnterAndLeave(t *testing.T) {
	f := newFixture(t)
	f.put(t, boundPod("a", "n1"))
	f.put(t, boundPod("b", "n2"))
	lines := watchPodsOnN1(t, f)
	next := func() string {
		require.True(t, lines.Scan())
		var ev struct {
			Type   string
			Object api.Pod
		}
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
		return ev.Type + " " + ev.Object.Name
	}
	assert.Equal(t, "ADDED a", next())
	f.put(t, boundPod("b", "n1"))
	assert.Equal(t, "ADDED b", next())
	f.put(t, boundPod("a", "n2"))
	assert.Equal(t, "DELETED a", next())
	f.put(t, boundPod("c", "n3"))
	f.put(t, boundPod("b", "n1"))
	assert.Equal(t, "MODIFIED b", next(), "c, on another node, sent nothing")
}

// Kubernetes' watch cache sends an object that stops matching as DELETED
// with the state that last matched and the revision of the write that made
// it leave, so that the watcher can resume from that revision.
func TestARESTPodWatchShouldSendAPodThatLeavesTheSelectionAsItLastMatched(t *testing.T) {
	f := newFixture(t)
	f.put(t, boundPod("a", "n1"))
	lines := watchPodsOnN1(t, f)
	type event struct {
		Type   string
		Object api.Pod
		RV     string
	}
	next := func() event {
		require.True(t, lines.Scan())
		var ev event
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
		var meta struct {
			Object struct {
				Metadata struct{ ResourceVersion string }
			}
		}
		require.NoError(t, json.Unmarshal(lines.Bytes(), &meta))
		ev.RV = meta.Object.Metadata.ResourceVersion
		return ev
	}
	require.Equal(t, "ADDED", next().Type)
	labelled := boundPod("a", "n1")
	labelled.Metadata.Labels = map[string]string{"app": "web"}
	f.put(t, labelled)
	require.Equal(t, "MODIFIED", next().Type)

	moved := boundPod("a", "n2")
	rev := f.put(t, moved)
	ev := next()
	assert.Equal(t, "DELETED", ev.Type)
	assert.Equal(t, "n1", ev.Object.Spec.NodeName, "the pod as it last matched, not as it is now")
	assert.Equal(t, map[string]string{"app": "web"}, ev.Object.Metadata.Labels, "its last matching state, not its first")
	assert.Equal(t, strconv.FormatUint(uint64(rev), 10), ev.RV, "the revision of the write that moved it")
}

func TestAFieldSelectorTheServerCannotTakeShouldBeRefused(t *testing.T) {
	f := newFixture(t)
	for _, sel := range []string{"spec.hostName=n1", "spec.nodeName"} {
		code, body := f.do(t, "GET", "/api/v1/pods?fieldSelector="+url.QueryEscape(sel), "ro", "")
		assert.Equal(t, http.StatusBadRequest, code, sel)
		assert.Equal(t, "BadRequest", body["reason"], sel)
		code, _ = f.do(t, "GET", "/store/pods/keys?selector="+url.QueryEscape(sel), "ro", "")
		assert.Equal(t, http.StatusBadRequest, code, sel)
	}
	code, _ := f.do(t, "GET", "/api/v1/nodes?fieldSelector="+url.QueryEscape("spec.nodeName=n1"), "ro", "")
	assert.Equal(t, http.StatusBadRequest, code, "nodes have no such field")
}

// watchPodsOnN1 opens a REST watch of the default namespace's pods with
// the field selector spec.nodeName=n1, closed when the test ends, and
// returns its event lines.
func watchPodsOnN1(t *testing.T, f *fixture) *bufio.Scanner {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/api/v1/namespaces/default/pods?watch=1&fieldSelector="+url.QueryEscape("spec.nodeName=n1"), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer ro")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewScanner(resp.Body)
}
