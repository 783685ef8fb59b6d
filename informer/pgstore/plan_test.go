package pgstore_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
)

// TestReaderQueriesArePlannedBelowTheJITThreshold guards the watch latency:
// a poll whose estimated cost passes jit_above_cost is JIT-compiled on
// every execution, which took 15-150 ms per poll on this machine (the
// write → informer p99: docs/design/pgstore.md, Measured). The estimates must
// stay low on a fresh store (no statistics yet: PostgreSQL guesses 1270 rows
// for an unanalyzed table) and on an analyzed one with a long log, with the
// custom plans of the first executions and the generic plan after them,
// and stay below a tenth of the threshold, so that a longer log or another
// statistics sample does not tip them over.
func TestReaderQueriesArePlannedBelowTheJITThreshold(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	s := pgx.Identifier{schema}.Sanitize()
	var threshold float64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT current_setting('jit_above_cost')::float8`).Scan(&threshold))
	// The parameters of each statement, as EXECUTE takes them.
	args := map[string]string{"read": `(1, '{c}', 1)`, "catchUp": `(1, 2, 'c')`, "bounds": ``, "anchored": `(1)`}

	check := func(state string) {
		conn, err := pool.Acquire(t.Context())
		require.NoError(t, err)
		defer conn.Release()
		c := conn.Conn()
		for name, q := range pgstore.ReaderQueries(db) {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				_, err := c.Exec(t.Context(), `SET plan_cache_mode = `+mode)
				require.NoError(t, err)
				_, err = c.Exec(t.Context(), `PREPARE plan_probe AS `+q)
				require.NoError(t, err, name)
				sql := `EXPLAIN (FORMAT JSON) EXECUTE plan_probe` + args[name]
				var out []byte
				require.NoError(t, c.QueryRow(t.Context(), sql, pgx.QueryExecModeSimpleProtocol).Scan(&out), name)
				var plan []struct {
					Plan struct {
						TotalCost float64 `json:"Total Cost"`
					} `json:"Plan"`
				}
				require.NoError(t, json.Unmarshal(out, &plan))
				t.Logf("%s, %s, %s: estimated cost %.0f", state, name, mode, plan[0].Plan.TotalCost)
				require.Less(t, plan[0].Plan.TotalCost, threshold/10, "%s, %s, %s: %s", state, name, mode, out)
				_, err = c.Exec(t.Context(), `DEALLOCATE plan_probe`)
				require.NoError(t, err)
			}
		}
		_, err = c.Exec(t.Context(), `RESET plan_cache_mode`)
		require.NoError(t, err)
	}
	check("fresh store")
	_, err := pool.Exec(t.Context(), `SELECT count(`+s+`.write('c', 'k' || g, 'c', 0, '\x00'::bytea)) FROM generate_series(1, 5000) g`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `ANALYZE `+s+`.log; ANALYZE `+s+`.meta; ANALYZE `+s+`.head`, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	check("5 000 changes, analyzed")
}
