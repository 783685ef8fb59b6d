package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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
// psql itself runs the line from openPostgres's doc, scaling it to 3 live:
// the line sends its NOTIFY (seen on the schema's channel; the test fails
// without it), and the controllers follow, then a deletion removes its pods
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

	// psql's line must wake the controllers' reader with a NOTIFY on the
	// schema's channel: a write alone would reach them at their next poll,
	// and their own writes' NOTIFYs (payload: their DB's id) would then
	// wake every other process, so an arrival proves nothing. Listen for
	// the line's own, whose payload is empty.
	lc, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer func() { _ = lc.Close(context.Background()) }()
	_, err = lc.Exec(t.Context(), "LISTEN "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql (scripts/servers.sh installs postgresql-client)")
	line := strings.ReplaceAll(strings.ReplaceAll(psqlRecipe, "converge_demo", schema), `"replicas": 5`, `"replicas": 3`)
	psqlOut, err := exec.CommandContext(t.Context(), psql, "-X", "-v", "ON_ERROR_STOP=1", dsn, "-c", line).CombinedOutput()
	require.NoError(t, err, "%s", psqlOut)
	require.Contains(t, string(psqlOut), "patch")
	nctx, ncancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer ncancel()
	for {
		n, err := lc.WaitForNotification(nctx)
		require.NoError(t, err, "psql's line sent no NOTIFY on the schema's channel")
		if n.Payload == "" {
			break
		}
	}
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

// psqlRecipe is the psql line of openPostgres's doc, between its double
// quotes, unescaped (TestPsqlRecipeIsTheDocsLine).
var psqlRecipe = `SELECT converge_demo.patch('replicasets', 'web', '{"spec": {"replicas": 5}}')`

// TestPsqlRecipeIsTheDocsLine: the statement TestPostgresStore runs is
// the one openPostgres's doc shows.
func TestPsqlRecipeIsTheDocsLine(t *testing.T) {
	src, err := os.ReadFile("store.go")
	require.NoError(t, err)
	const prefix = "//\tpsql \"$DSN\" -c \""
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			cmd := strings.TrimSuffix(strings.TrimSpace(rest), `"`)
			assert.Equal(t, psqlRecipe, strings.ReplaceAll(cmd, `\"`, `"`))
			return
		}
	}
	t.Fatalf("no line %q… in store.go", prefix)
}
