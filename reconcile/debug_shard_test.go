package reconcile_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// markupReplica is a replica identity written as markup (an identity may
// hold anything but a "/"): the pages must show it as text.
const markupReplica = "<i>replica-a"

// overviewOf returns m's overview as HTML and as decoded JSON.
func overviewOf(t *testing.T, m *reconcile.Manager) (string, debugpage.Overview) {
	t.Helper()
	code, body := getPage(t, m.DebugHandler(), "/debug/converge/", "")
	require.Equal(t, http.StatusOK, code, body)
	code, js := getPage(t, m.DebugHandler(), "/debug/converge/?format=json", "")
	require.Equal(t, http.StatusOK, code, js)
	var o debugpage.Overview
	require.NoError(t, json.Unmarshal([]byte(js), &o))
	return body, o
}

// heldCell is how the overview writes the held buckets: "ID@EPOCH", with
// " (releasing)" after those being given up.
func heldCell(st shard.Status) string {
	parts := make([]string, len(st.Held))
	for i, b := range st.Held {
		parts[i] = fmt.Sprintf("%d@%d", b.ID, b.Epoch)
		for _, r := range st.Releasing {
			if r == b.ID {
				parts[i] += " (releasing)"
			}
		}
	}
	return strings.Join(parts, ", ")
}

func TestTheOverviewShouldShowASharderThatHasNotStartedAsHoldingNothing(t *testing.T) {
	s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "ints", Identity: markupReplica, Buckets: shardBuckets})
	require.NoError(t, err)
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: quietLogger})
	require.NoError(t, err)

	body, o := overviewOf(t, m)
	assert.Contains(t, body, "<h2>Sharding</h2>")
	assert.Contains(t, body, "<tr><th>identity</th><td>&lt;i&gt;replica-a</td></tr>", "the identity is text")
	assert.NotContains(t, body, "<i>")
	assert.Contains(t, body, "<tr><th>live members</th><td>none</td></tr>", "not running: not even itself")
	assert.Contains(t, body, "<tr><th>held (0 of 16), bucket@epoch</th><td>none</td></tr>")
	assert.Contains(t, body, "<tr><th>releasing (moves in progress)</th><td>none</td></tr>")
	assert.Contains(t, body, "<tr><th>wanted, not held yet</th><td>none</td></tr>")

	require.NotNil(t, o.Sharding)
	assert.Equal(t, markupReplica, o.Sharding.Identity)
	assert.Equal(t, shardBuckets, o.Sharding.Buckets)
	assert.Empty(t, o.Sharding.Members)
	assert.Empty(t, o.Sharding.Held)
}

func TestTheOverviewShouldShowTheBucketsAReplicaHoldsWithTheirEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := startShardedReplica(t, markupReplica, memlock.NewLocks(), storeWithKeys(20), &shardLog{t: t}, time.Millisecond)
		settled(t, a)
		synctest.Wait() // nothing moves while the page and the Status are read

		st := a.s.Status()
		require.Len(t, st.Held, shardBuckets)
		body, o := overviewOf(t, a.m)
		assert.Contains(t, body, "<tr><th>live members</th><td>&lt;i&gt;replica-a</td></tr>")
		assert.Contains(t, body, fmt.Sprintf("<tr><th>held (16 of 16), bucket@epoch</th><td>%s</td></tr>", heldCell(st)))
		assert.Contains(t, body, "<tr><th>releasing (moves in progress)</th><td>none</td></tr>")
		assert.NotContains(t, body, "<i>")

		require.NotNil(t, o.Sharding)
		assert.Equal(t, []string{markupReplica}, o.Sharding.Members)
		assert.Equal(t, st.Held, o.Sharding.Held, "every bucket with its epoch")
		for _, b := range o.Sharding.Held {
			assert.Positive(t, b.Epoch, "bucket %d", b.ID)
		}
		a.stop(t)
	})
}

// While a bucket moves from a (draining a reconcile that outlives the
// grace) to b, a's overview shows it held and releasing, and b's shows it
// wanted but not held yet.
func TestTheOverviewsShouldShowABucketMovingAsReleasingOnTheOldOwnerAndWantedOnTheNewOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Only keys of buckets that move to b, so that a's workers are
		// all busy with them when b joins.
		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		store := storeOfKeysOwnedBy(owners, "b", 20)
		locks, log := memlock.NewLocks(), &shardLog{t: t}
		a := startShardedReplica(t, "a", locks, store, log, time.Hour) // never finishes by itself
		settled(t, a)
		b := startShardedReplica(t, "b", locks, store, log, time.Millisecond)
		for deadline := time.Now().Add(time.Minute); len(a.s.Status().Releasing) == 0; time.Sleep(bubbleRetry / 4) {
			require.True(t, time.Now().Before(deadline), "a never started giving a bucket up")
		}
		synctest.Wait()

		stA, stB := a.s.Status(), b.s.Status()
		bodyA, oA := overviewOf(t, a.m)
		assert.Contains(t, bodyA, "<tr><th>releasing (moves in progress)</th><td>"+bucketList(stA.Releasing)+"</td></tr>")
		assert.Contains(t, bodyA, heldCell(stA))
		assert.Contains(t, bodyA, " (releasing)")
		require.NotNil(t, oA.Sharding)
		assert.Equal(t, stA.Releasing, oA.Sharding.Releasing)
		for _, id := range stA.Releasing {
			assert.Equal(t, "b", owners[id], "bucket %d releasing on a is b's", id)
			assert.Contains(t, stB.Campaigning, id, "b wants bucket %d while a drains it", id)
		}

		bodyB, oB := overviewOf(t, b.m)
		assert.Contains(t, bodyB, "<tr><th>wanted, not held yet</th><td>"+bucketList(stB.Campaigning)+"</td></tr>")
		require.NotNil(t, oB.Sharding)
		assert.Equal(t, stB.Campaigning, oB.Sharding.Campaigning)
		assert.ElementsMatch(t, []string{"a", "b"}, oB.Sharding.Members)
		b.stop(t)
		a.stop(t)
	})
}

// storeOfKeysOwnedBy returns a store of n keys whose buckets owners
// assigns to owner.
func storeOfKeysOwnedBy(owners []string, owner string, n int) *memstore.Store[string, int] {
	store := must.Do(memstore.New[string, int]())
	for i := 0; store.Len() < n; i++ {
		if key := fmt.Sprintf("key-%03d", i); owners[shard.BucketOf(key, shardBuckets)] == owner {
			store.Put(key, i)
		}
	}
	return store
}

// bucketList writes IDs as the overview does: "1, 4, 9".
func bucketList(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ", ")
}
