package etcdlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/locktest"
)

func TestLockShouldSatisfyTheLockContract(t *testing.T) {
	t.Parallel()
	locktest.Run(t, func(t *testing.T) leader.Lock { return etcdlock.NewLock(newClient(t), uniqueKey(t)) })
}

func TestRecordShouldBeStoredAsJSONWithTheModRevisionAsVersion(t *testing.T) {
	t.Parallel()
	cli := newClient(t)
	key := uniqueKey(t)
	l := etcdlock.NewLock(cli, key)
	assert.Contains(t, l.Describe(), key)
	assert.Contains(t, l.Describe(), cli.Endpoints()[0])

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stored, err := l.Create(t.Context(), leader.Record{HolderIdentity: "a", Term: 3, LeaseDuration: time.Second, AcquireTime: at, RenewTime: at, Version: 99})
	require.NoError(t, err)
	raw, err := cli.Get(t.Context(), key)
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1)
	assert.Equal(t, raw.Kvs[0].ModRevision, stored.Version, "the caller's Version is ignored")
	assert.JSONEq(t, `{"holderIdentity":"a","term":3,"leaseDurationNanos":1000000000,
		"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:05Z"}`, string(raw.Kvs[0].Value))

	existing, err := l.Create(t.Context(), leader.Record{HolderIdentity: "b"})
	require.ErrorIs(t, err, leader.ErrConflict)
	assert.Equal(t, stored, existing, "a conflicting Create returns the existing record")
	assert.Contains(t, err.Error(), `"a"`)
}

func TestUpdateShouldNeverCreateTheKey(t *testing.T) {
	t.Parallel()
	cli := newClient(t)
	key := uniqueKey(t)
	l := etcdlock.NewLock(cli, key)
	_, err := l.Update(t.Context(), leader.Record{}, leader.Record{HolderIdentity: "a"})
	require.ErrorIs(t, err, leader.ErrConflict, "Version 0 must not match a missing key's ModRevision")
	_, err = l.Get(t.Context())
	require.ErrorIs(t, err, leader.ErrNotFound)

	v1, err := l.Create(t.Context(), leader.Record{HolderIdentity: "a"})
	require.NoError(t, err)
	_, err = cli.Delete(t.Context(), key)
	require.NoError(t, err)
	_, err = l.Update(t.Context(), v1, leader.Record{HolderIdentity: "b"})
	require.ErrorIs(t, err, leader.ErrConflict, "the record was deleted")
	_, err = l.Get(t.Context())
	require.ErrorIs(t, err, leader.ErrNotFound)
}

func TestTwoElectorsShouldHaveOneLeaderAndHandOverOnRelease(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	locktest.Handover(t, func(t *testing.T) leader.Lock { return etcdlock.NewLock(newClient(t), key) })
}
