package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/kube"
)

// Delete at a revision the server's history no longer has (an object left
// unchanged longer than the watch cache's window, or compacted in etcd)
// still returns the revision of its DELETED event: it does not watch for
// that event from the old revision. Secrets are served from etcd, whose
// compaction makes the old revision unwatchable at once. Not parallel:
// the compaction expires every watch of secrets.
func TestDeleteAtARevisionOlderThanTheServersHistoryShouldReturnItsEventsRevision(t *testing.T) {
	cfg := restConfig(t)
	etcd := testserver.KubeEtcd(t)
	ctx := t.Context()
	s, err := kube.New[secret](cfg, secretsGVR, kube.WithNamespace[secret](namespace(t, cfg)))
	require.NoError(t, err)
	ra, err := s.Create(ctx, "a", secretValue(1))
	require.NoError(t, err)
	_, err = s.Create(ctx, "b", secretValue(2))
	require.NoError(t, err)
	_, err = s.Create(ctx, "keep", secretValue(3)) // history after a and b
	require.NoError(t, err)
	require.NoError(t, compactKubeEtcd(ctx, etcd[0]))

	_, after, err := s.List(ctx)
	require.NoError(t, err)
	events, done := watching[secret](t, s, after)

	da, err := s.Delete(ctx, "a", ra)
	require.NoError(t, err, "Delete at a compacted revision")
	db, err := s.Delete(ctx, "b", 0)
	require.NoError(t, err, "Delete at revision 0 of a key written before the compaction")
	for _, want := range []struct {
		key string
		rev informer.Revision
	}{{"a", da}, {"b", db}} {
		e := next(t, events, done)
		assert.Equal(t, informer.Delete, e.Type)
		assert.Equal(t, want.key, e.Key)
		assert.Equal(t, want.rev, e.Revision, "Delete returned the revision of its event")
	}
}
