package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

// thing is a value with object.Meta, as a controller's type has.
type thing struct {
	object.Meta
	Spec   map[string]any `json:"spec,omitempty"`
	Status map[string]any `json:"status,omitempty"`
}

// patch calls the schema's patch function as psql would and returns the
// revision it returns.
func patch(ctx context.Context, pool *pgxpool.Pool, schema, coll, key, p string) (int64, error) {
	var rev int64
	err := pool.QueryRow(ctx, `SELECT `+pgx.Identifier{schema}.Sanitize()+`.patch($1, $2, $3)`, coll, key, p).Scan(&rev)
	return rev, err
}

// TestPatchShouldMergeIntoTheValueAndBumpTheGenerationOnlyWhenTheSpecChanges
// walks one key through the SQL patch function: a create with a
// generation starts it at 1, a spec change bumps it, a status change, a
// patch that sets the generation itself and one that changes nothing do
// not (the last writes nothing), a null member removes it, and members the
// patch does not name (finalizers, status) are kept.
func TestPatchShouldMergeIntoTheValueAndBumpTheGenerationOnlyWhenTheSpecChanges(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	store := must.Do(pgstore.New[thing](newDB(t, pool, schema), coll))
	step := func(p string, want thing, wrote bool) {
		t.Helper()
		_, before, _, err := store.Get(t.Context(), "web")
		require.NoError(t, err)
		rev, err := patch(t.Context(), pool, schema, coll, "web", p)
		require.NoError(t, err, p)
		got, after, ok, err := store.Get(t.Context(), "web")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, want, got, p)
		assert.Equal(t, int64(after), rev, "%s: the revision returned", p)
		assert.Equal(t, wrote, after != before, "%s: wrote", p)
	}
	step(`{"generation": 0, "spec": {"replicas": 2, "image": "a"}}`,
		thing{Meta: object.Meta{Generation: 1}, Spec: map[string]any{"replicas": 2.0, "image": "a"}}, true)
	step(`{"spec": {"replicas": 3}}`,
		thing{Meta: object.Meta{Generation: 2}, Spec: map[string]any{"replicas": 3.0, "image": "a"}}, true)
	step(`{"status": {"ready": 3}, "finalizers": ["x"]}`,
		thing{Meta: object.Meta{Generation: 2, Finalizers: []string{"x"}}, Spec: map[string]any{"replicas": 3.0, "image": "a"},
			Status: map[string]any{"ready": 3.0}}, true)
	step(`{"generation": 9}`,
		thing{Meta: object.Meta{Generation: 2, Finalizers: []string{"x"}}, Spec: map[string]any{"replicas": 3.0, "image": "a"},
			Status: map[string]any{"ready": 3.0}}, false)
	step(`{"spec": {"image": "a", "replicas": 3}}`,
		thing{Meta: object.Meta{Generation: 2, Finalizers: []string{"x"}}, Spec: map[string]any{"replicas": 3.0, "image": "a"},
			Status: map[string]any{"ready": 3.0}}, false)
	step(`{"spec": {"image": null}, "status": null}`,
		thing{Meta: object.Meta{Generation: 3, Finalizers: []string{"x"}}, Spec: map[string]any{"replicas": 3.0}}, true)

	// A value without a generation gets none.
	_, err := patch(t.Context(), pool, schema, coll, "plain", `{"spec": {"a": 1}}`)
	require.NoError(t, err)
	_, err = patch(t.Context(), pool, schema, coll, "plain", `{"spec": {"a": 2}}`)
	require.NoError(t, err)
	got, _, _, err := store.Get(t.Context(), "plain")
	require.NoError(t, err)
	assert.Equal(t, thing{Spec: map[string]any{"a": 2.0}}, got)
}

// TestPatchShouldRejectAValueThatIsNotJSONAndWriteNothing: invalid JSON
// and a NULL patch fail with a clear error and leave the key as it was.
func TestPatchShouldRejectAValueThatIsNotJSONAndWriteNothing(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	store := must.Do(pgstore.New[thing](newDB(t, pool, schema), coll))
	rev, err := patch(t.Context(), pool, schema, coll, "web", `{"spec": {"replicas": 1}}`)
	require.NoError(t, err)

	for _, p := range []string{`{"spec": {"replicas": 3}`, `spec: replicas: 3`, ``} {
		_, err = patch(t.Context(), pool, schema, coll, "web", p)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, "%q", p)
		assert.Equal(t, "22P02", pe.Code)
		assert.Contains(t, pe.Message, fmt.Sprintf("patch(%s, web): the patch is not valid JSON", coll))
	}
	var pe *pgconn.PgError
	_, err = pool.Exec(t.Context(), `SELECT `+pgx.Identifier{schema}.Sanitize()+`.patch($1, 'web', NULL)`, coll)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "22004", pe.Code)
	_, err = patch(t.Context(), pool, schema, coll, "absent", `{"spec": `)
	require.Error(t, err)

	v, after, _, err := store.Get(t.Context(), "web")
	require.NoError(t, err)
	assert.EqualValues(t, rev, after, "nothing written")
	assert.Equal(t, thing{Spec: map[string]any{"replicas": 1.0}}, v)
	_, _, ok, err := store.Get(t.Context(), "absent")
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestPatchShouldReplaceAValueThatDoesNotDecodeAndSendTheNotify: a value
// psql wrote that is not JSON at all is replaced by the patch (merged
// into {}), and the call sends the schema's NOTIFY with an empty payload
// (a DB's own carry its id), so that every informer sees the change at
// once rather than at its next poll.
func TestPatchShouldReplaceAValueThatDoesNotDecodeAndSendTheNotify(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	store := must.Do(pgstore.New[thing](newDB(t, pool, schema), coll))
	writeRaw(t, pool, schema, coll, "web", `not json`)
	conn, err := pgx.Connect(t.Context(), pool.Config().ConnConfig.ConnString())
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(t.Context(), `LISTEN `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)

	_, err = patch(t.Context(), pool, schema, coll, "web", `{"spec": {"replicas": 1}}`)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err, "no NOTIFY")
	assert.Equal(t, schema, n.Channel)
	assert.Empty(t, n.Payload)
	v, _, _, err := store.Get(t.Context(), "web")
	require.NoError(t, err)
	assert.Equal(t, thing{Spec: map[string]any{"replicas": 1.0}}, v)
}

// TestPatchShouldLoseNoUpdateBesideConcurrentPatchesAndTypedWrites: 4
// sessions patch a member each of one key 50 times while a typed writer
// updates the status with compare-and-swap (retried on a conflict): every patch's last member and
// the typed writer's last status are in the final value, and the
// generation counts every spec change.
func TestPatchShouldLoseNoUpdateBesideConcurrentPatchesAndTypedWrites(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	store := must.Do(pgstore.New[thing](newDB(t, pool, schema), coll))
	_, err := patch(t.Context(), pool, schema, coll, "k", `{"generation": 0, "spec": {}}`)
	require.NoError(t, err)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for w := range 4 {
		wg.Go(func() {
			for i := 1; i <= n; i++ {
				if _, err := patch(t.Context(), pool, schema, coll, "k", fmt.Sprintf(`{"spec": {"w%d": %d}}`, w, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := 1; i <= n; i++ {
			var err error
			for tries := 0; tries == 0 || errors.Is(err, informer.ErrConflict) && tries < 100; tries++ {
				_, _, err = informer.Update(t.Context(), store, "k", func(v *thing) error {
					v.Status = map[string]any{"seen": float64(i)}
					return nil
				})
			}
			if err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	v, _, _, err := store.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"w0": float64(n), "w1": float64(n), "w2": float64(n), "w3": float64(n)}, v.Spec)
	assert.Equal(t, map[string]any{"seen": float64(n)}, v.Status)
	assert.EqualValues(t, 1+4*n, v.Generation)
}

// TestRequestDeleteShouldHonourFinalizersAsInformerRequestDeleteDoes: a
// key without finalizers is deleted; one with finalizers gets
// deletionRequested (decoded as Meta's time) once, and a second request
// keeps the first time and writes nothing; an absent key is 0.
func TestRequestDeleteShouldHonourFinalizersAsInformerRequestDeleteDoes(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	store := must.Do(pgstore.New[thing](newDB(t, pool, schema), coll))
	requestDelete := func(key string) int64 {
		t.Helper()
		var rev int64
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT `+pgx.Identifier{schema}.Sanitize()+`.request_delete($1, $2)`,
			coll, key).Scan(&rev))
		return rev
	}
	_, err := patch(t.Context(), pool, schema, coll, "plain", `{"spec": {"a": 1}}`)
	require.NoError(t, err)
	before := time.Now().Add(-time.Second)
	_, err = patch(t.Context(), pool, schema, coll, "kept", `{"spec": {"a": 1}, "finalizers": ["x"]}`)
	require.NoError(t, err)

	assert.Positive(t, requestDelete("plain"))
	_, _, ok, err := store.Get(t.Context(), "plain")
	require.NoError(t, err)
	assert.False(t, ok, "deleted")

	rev := requestDelete("kept")
	v, got, ok, err := store.Get(t.Context(), "kept")
	require.NoError(t, err)
	require.True(t, ok)
	assert.EqualValues(t, rev, got)
	assert.True(t, v.Deleting())
	assert.WithinRange(t, v.DeletionRequested, before, time.Now().Add(time.Second))
	assert.Equal(t, rev, requestDelete("kept"), "a second request writes nothing")
	again, _, _, err := store.Get(t.Context(), "kept")
	require.NoError(t, err)
	assert.Equal(t, v.DeletionRequested, again.DeletionRequested)

	assert.Zero(t, requestDelete("absent"))
}
