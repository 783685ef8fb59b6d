package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
)

// TestSetupShouldSucceedForEveryConcurrentCallerOnAFreshSchema: 8
// goroutines call Setup at once on a schema that does not exist; all
// succeed, and there is one schema with one meta row (one store id, one
// base). Setup again later changes neither.
func TestSetupShouldSucceedForEveryConcurrentCallerOnAFreshSchema(t *testing.T) {
	pool := newPool(t)
	schema := fmt.Sprintf("cvt_setup_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
	start := make(chan struct{})
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = pgstore.Setup(t.Context(), pool, schema)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "caller %d", i)
	}
	meta := func() (n int, id string, base int64) {
		t.Helper()
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*), min(store_id::text), min(base) FROM `+
			pgx.Identifier{schema}.Sanitize()+`.meta`).Scan(&n, &id, &base))
		return n, id, base
	}
	n, id, base := meta()
	assert.Equal(t, 1, n, "one meta row")
	var schemas int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&schemas))
	assert.Equal(t, 1, schemas)

	require.NoError(t, pgstore.Setup(t.Context(), pool, schema))
	n2, id2, base2 := meta()
	assert.Equal(t, []any{n, id, base}, []any{n2, id2, base2}, "Setup again keeps the store's identity")
}
