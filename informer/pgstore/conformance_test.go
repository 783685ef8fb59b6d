package pgstore_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// TestStoreConformance runs the Store conformance suite, the Source suite
// included, against the real PostgreSQL, each subtest on a collection of
// its own in one schema. Expire compacts the whole schema's log, which is
// why the suite's subtests run one after another.
func TestStoreConformance(t *testing.T) {
	pool := newPool(t)
	db := newDB(t, pool, newSchema(t, pool))
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, item]{
		New: func(t *testing.T) informer.Store[string, item] {
			return must.Do(pgstore.New[item](db, newColl()))
		},
		Expire: func(ctx context.Context, s informer.Store[string, item]) error {
			_, err := s.(*pgstore.Store[item]).Compact(ctx, 0)
			return err
		},
		// Deletes are log rows without a value.
		DeletesCarryValue: false,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}

// TestStoreSourceConformanceWrittenWithSQL runs the Source suite on a
// typed collection written only as psql would, with the schema's write
// function: good values, and (Backend.PutUndecodable) JSON that does not
// decode into the collection's type.
func TestStoreSourceConformanceWrittenWithSQL(t *testing.T) {
	pool, writer := newPool(t), newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	s := pgx.Identifier{schema}.Sanitize()
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			store := must.Do(pgstore.New[item](db, newColl()))
			return sourcetest.Backend[string, item]{
				Source: store,
				Put: func(ctx context.Context, key string, v item) error {
					data, err := json.Marshal(v)
					if err != nil {
						return err
					}
					return putRaw(ctx, writer, schema, store.Collection(), key, string(data))
				},
				PutUndecodable: func(ctx context.Context, key string) error {
					return putRaw(ctx, writer, schema, store.Collection(), key, `{"n": "not a number"}`)
				},
				Delete: func(ctx context.Context, key string) error {
					_, err := writer.Exec(ctx, `SELECT `+s+`.write($1, $2, 'd', 0, NULL)`, store.Collection(), key)
					return err
				},
				Expire: func(ctx context.Context) error {
					_, err := store.Compact(ctx, 0)
					return err
				},
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}
