package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/testserver"
)

// TestPostgresStore runs both controllers on --store postgres://… (the
// test server; skipped without one, failed with CONVERGE_INTEGRATION=1): a
// ReplicaSet applied through the store converges to 2 running pods, then
// psql's statement from openPostgres's doc, run here through pgx, scales it
// to 3 live and the controllers follow, then a deletion removes its pods
// and the ReplicaSet; describe, on stores of its own, shows the events the
// controllers wrote to PostgreSQL. (Failed with openStores ignoring postgres URLs, and
// with openPostgres setting up the default schema instead of the prefix's,
// where psql's statement did not find the ReplicaSet.)
func TestPostgresStore(t *testing.T) {
	t.Setenv(asMainEnv, "1") // the workers are this test binary
	dsn := testserver.Postgres(t)
	assert.Equal(t, "converge_demo_x1", schemaName("/Converge-demo/x1/"))
	prefix := fmt.Sprintf("/converge-test/%d/", time.Now().UnixNano())
	schema := schemaName(prefix)
	st, err := openStores(dsn, prefix)
	require.NoError(t, err)
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
		pool.Close()
	})
	t.Cleanup(st.close)
	assert.Contains(t, st.describe, "schema "+schema)

	cfg := config{node: "local", managerAddr: "off", backoffBase: 200 * time.Millisecond, backoffCap: time.Second}
	sys, err := newSystem(cfg, st, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- sys.mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-ran); sys.agent.shutdown() })

	ready := func(replicas int) func() bool {
		return func() bool {
			rs, _, ok, err := st.replicaSets.Get(t.Context(), "web")
			return err == nil && ok && rs.Status.ReadyReplicas == replicas && rs.Status.Replicas == replicas
		}
	}
	require.NoError(t, apply(t.Context(), st.replicaSets, "web", ReplicaSetSpec{Replicas: 2, Command: []string{"replicaset", "worker"}}))
	require.Eventually(t, ready(2), 30*time.Second, 5*time.Millisecond, "2 pods ready")

	s := pgx.Identifier{schema}.Sanitize()
	tag, err := pool.Exec(t.Context(), `SELECT `+s+`.write('replicasets', 'web', 'u', 0, convert_to(jsonb_set(jsonb_set(
	    convert_from(l.value, 'UTF8')::jsonb, '{spec,replicas}', '3'),
	    '{generation}', to_jsonb((convert_from(l.value, 'UTF8')::jsonb->>'generation')::int + 1))::text, 'UTF8'))
	  FROM `+s+`.head h JOIN `+s+`.log l ON l.rev = h.rev
	 WHERE h.coll = 'replicasets' AND h.key = 'web'`)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	require.Eventually(t, ready(3), 30*time.Second, 5*time.Millisecond, "3 pods ready after psql's change")
	rs, _, _, err := st.replicaSets.Get(t.Context(), "web")
	require.NoError(t, err)
	assert.EqualValues(t, 2, rs.Status.ObservedGeneration)

	// describe, from stores of its own as another process's, reads the
	// events the controllers' sinks wrote to PostgreSQL.
	other, err := openStores(dsn, prefix)
	require.NoError(t, err)
	defer other.close()
	var out bytes.Buffer
	require.Eventually(t, func() bool {
		out.Reset()
		return describe(t.Context(), &out, other, "web", time.Now()) == nil &&
			strings.Count(out.String(), "SuccessfulCreate") == 3
	}, 30*time.Second, 5*time.Millisecond, "three SuccessfulCreate events in describe")
	assert.Contains(t, out.String(), "Replicas:     3 current / 3 desired")

	_, _, err = informer.RequestDelete(t.Context(), st.replicaSets, "web")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, _, ok, err := st.replicaSets.Get(t.Context(), "web")
		pods, _, lerr := st.pods.List(t.Context())
		return err == nil && lerr == nil && !ok && len(pods) == 0
	}, 30*time.Second, 5*time.Millisecond, "the ReplicaSet and its pods deleted")
}
