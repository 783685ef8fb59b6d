package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// waitKey waits until events brings key, and returns its event.
func waitKey(t *testing.T, events <-chan informer.Event[string, item], key string) informer.Event[string, item] {
	t.Helper()
	for {
		select {
		case e := <-events:
			if e.Key == key {
				return e
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event of %s", key)
		}
	}
}

// TestAFollowedTableShouldReachTheLogUnderReplicaReplicationRole: a write
// under session_replication_role = replica (a logical replication
// subscriber's apply worker) fires the triggers too. (Failed before Follow
// enabled them ALWAYS: the write never reached the Watch.)
func TestAFollowedTableShouldReachTheLogUnderReplicaReplicationRole(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	table, coll := newTable(t, pool, schema)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	src := must.Do(pgstore.NewTable[item](newDB(t, pool, schema), coll))
	_, after, err := src.List(t.Context())
	require.NoError(t, err)
	events := watchEvents(t, src, after, 10)

	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), `SET session_replication_role = replica`)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ('replica', 1)`)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `RESET session_replication_role`)
	require.NoError(t, err)
	require.NoError(t, upsert(t.Context(), pool, table, "origin", item{N: 2}))

	e := <-events
	assert.Equal(t, "replica", e.Key, "the replica-mode write comes first")
	waitKey(t, events, "origin")
}

// TestADroppedFollowedTableShouldNotBlockItsCollectionFromFollowingAgain:
// follow, DROP TABLE, create it again, follow again: plain SQL reaches the
// Watch. (Failed before Follow forgot the dropped table's follows row: the
// second Follow was refused, the collection already followed.)
func TestADroppedFollowedTableShouldNotBlockItsCollectionFromFollowingAgain(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	table, coll := newTable(t, pool, schema)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	_, err := pool.Exec(t.Context(), `DROP TABLE `+table)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `CREATE TABLE `+table+` (id text PRIMARY KEY, n int NOT NULL, s text)`)
	require.NoError(t, err)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))

	src := must.Do(pgstore.NewTable[item](newDB(t, pool, schema), coll))
	_, after, err := src.List(t.Context())
	require.NoError(t, err)
	events := watchEvents(t, src, after, 10)
	require.NoError(t, upsert(t.Context(), pool, table, "again", item{N: 3}))
	assert.Equal(t, item{N: 3}, waitKey(t, events, "again").Value)
}
