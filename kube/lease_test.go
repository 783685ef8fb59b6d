package kube_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/locktest"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

func TestLockShouldPassTheLockConformanceSuite(t *testing.T) {
	cfg := restConfig(t)
	locktest.Run(t, func(t *testing.T) leader.Lock {
		l, err := kube.NewLock(cfg, namespace(t, cfg), "lock")
		require.NoError(t, err)
		return l
	})
}

func TestTwoElectorsOnOneLeaseShouldHaveOneLeaderAndHandOverOnRelease(t *testing.T) {
	cfg := restConfig(t)
	ns := namespace(t, cfg)
	locktest.Handover(t, func(t *testing.T) leader.Lock {
		l, err := kube.NewLock(cfg, ns, "lock")
		require.NoError(t, err)
		return l
	})
}

// The Lease reads as one client-go wrote: holder, duration, times and
// transitions in its spec, the term beside it in an annotation.
func TestTheLeaseShouldReadNaturallyWithTheTermInAnAnnotation(t *testing.T) {
	cfg := restConfig(t)
	ns := namespace(t, cfg)
	l, err := kube.NewLock(cfg, ns, "lock")
	require.NoError(t, err)
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	_, err = l.Create(t.Context(), leader.Record{HolderIdentity: "a", Term: 3, LeaseDuration: 1500 * time.Millisecond,
		AcquireTime: at, RenewTime: at.Add(time.Second)})
	require.NoError(t, err)

	raw, err := kube.New[json.RawMessage](cfg, schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		kube.WithNamespace[json.RawMessage](ns))
	require.NoError(t, err)
	data, _, ok, err := raw.Get(t.Context(), "lock")
	require.NoError(t, err)
	require.True(t, ok)
	var got struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, map[string]any{
		"holderIdentity": "a", "leaseDurationSeconds": 2.0, "leaseTransitions": 2.0,
		"acquireTime": "2026-01-02T03:04:05.123456Z", "renewTime": "2026-01-02T03:04:06.123456Z",
	}, got.Spec)
	assert.Equal(t, "3", got.Metadata.Annotations[kube.TermAnnotation])
}

// A PUT of an absent Lease creates it (leases allow create on update):
// Store.Update of an absent key must still be a conflict that leaves no
// object behind.
func TestUpdateOfAnAbsentObjectOfAResourceThatCreatesOnPutShouldConflict(t *testing.T) {
	cfg := restConfig(t)
	s, err := kube.New[json.RawMessage](cfg, schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		kube.WithNamespace[json.RawMessage](namespace(t, cfg)))
	require.NoError(t, err)
	_, err = s.Update(t.Context(), "l", json.RawMessage(`{"spec":{"holderIdentity":"a"}}`), 1)
	require.ErrorIs(t, err, informer.ErrConflict)
	_, _, ok, err := s.Get(t.Context(), "l")
	require.NoError(t, err)
	assert.False(t, ok, "the object the PUT created is gone")
}

func TestLocksShouldPassTheShardBackendConformanceSuite(t *testing.T) {
	cfg := restConfig(t)
	shardtest.RunBackend(t, func(t *testing.T) shard.Backend {
		l, err := kube.NewLocks(cfg, namespace(t, cfg), "shards")
		require.NoError(t, err)
		return l
	})
}
