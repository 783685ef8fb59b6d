package kube_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
)

// requestLog records the method and path of every request a transport
// sends.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// since returns the requests from the n-th on.
func (l *requestLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs[n:]...)
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// UpdateStatus writes a status with one PUT to the status subresource, at
// the revision given: the rest of the value is not written, a stale
// revision is a conflict, and a resource without a status subresource is
// an error rather than a write of the main resource.
func TestUpdateStatusShouldWriteOnlyTheStatusWithOneRequestAtTheRevisionGiven(t *testing.T) {
	cfg := rest.CopyConfig(restConfig(t))
	var log requestLog
	cfg.Wrap(log.wrap)
	s := widgets(t, cfg)
	ctx := t.Context()

	r1, err := s.Create(ctx, "w", Widget{Spec: WidgetSpec{Replicas: 1}})
	require.NoError(t, err)
	got, rev, ok, err := s.Get(ctx, "w")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, r1, rev)

	next := got
	next.Spec.Replicas = 7 // not written: the status subresource ignores it
	next.Status = WidgetStatus{Ready: 1, ObservedGeneration: got.Generation}
	before := log.len()
	r2, err := s.UpdateStatus(ctx, "w", next, rev)
	require.NoError(t, err)
	assert.Equal(t, []string{"PUT /apis/test.converge.dev/v1/namespaces/" + s.Namespace() + "/widgets/w/status"}, log.since(before),
		"one request, to the status subresource")
	assert.Greater(t, r2, rev)

	got, rev, _, err = s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, r2, rev, "UpdateStatus returns the revision written")
	assert.Equal(t, WidgetStatus{Ready: 1, ObservedGeneration: 1}, got.Status, "the status is written")
	assert.Equal(t, WidgetSpec{Replicas: 1}, got.Spec, "the spec in v is not written")
	assert.Equal(t, int64(1), got.Generation)

	next.Status.Ready = 2
	_, err = s.UpdateStatus(ctx, "w", next, r1)
	assert.ErrorIs(t, err, informer.ErrConflict, "a stale revision")
	_, err = s.UpdateStatus(ctx, "absent", next, r1)
	assert.ErrorIs(t, err, informer.ErrConflict, "an absent object")
	_, err = s.UpdateStatus(ctx, "w", next, 0)
	assert.ErrorIs(t, err, informer.ErrConflict, "revision 0")
	got, _, _, err = s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, 1, got.Status.Ready, "no write went through")

	cms, err := kube.New[map[string]any](cfg, configMapsGVR, kube.WithNamespace[map[string]any](s.Namespace()))
	require.NoError(t, err)
	cr, err := cms.Create(ctx, "c", map[string]any{"data": map[string]any{"k": "1"}})
	require.NoError(t, err)
	before = log.len()
	_, err = cms.UpdateStatus(ctx, "c", map[string]any{"data": map[string]any{"k": "2"}}, cr)
	require.ErrorContains(t, err, "no status subresource")
	assert.NotErrorIs(t, err, informer.ErrConflict)
	assert.Empty(t, log.since(before), "nothing is sent")
	cm, _, _, err := cms.Get(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"k": "1"}, cm["data"], "the ConfigMap is not written")
}
