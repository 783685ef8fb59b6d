package httpstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// servedStores remembers the store behind each client of a suite, for the
// suite's Expire.
type servedStores[S any] map[informer.Store[string, item]]S

// served serves store on loopback until t ends and returns a client of it.
func served(t *testing.T, store informer.Store[string, item]) *httpstore.Client[item] {
	srv := httptest.NewServer(must.Do(httpstore.NewServer(store, httpstore.ServerOptions[item]{})))
	t.Cleanup(srv.Close)
	c, err := httpstore.NewClient[item](srv.URL, httpstore.ClientOptions{HTTPClient: newHTTPClient(t)})
	require.NoError(t, err)
	return c
}

// etcdClient connects to the single-node test etcd (skipped without one,
// failed with CONVERGE_INTEGRATION=1) until t ends.
func etcdClient(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// uniquePrefix returns an etcd key prefix no other test or run uses.
func uniquePrefix(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "/converge-test/httpstore/" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + hex.EncodeToString(b) + "/"
}

// compact compacts etcd to its current revision.
func compact(ctx context.Context, cli *clientv3.Client, prefix string) error {
	resp, err := cli.Get(ctx, prefix)
	if err != nil {
		return err
	}
	_, err = cli.Compact(ctx, resp.Header.Revision)
	return err
}

// TestStoreConformanceOverEtcd runs the Store suite on a Client of a
// Server of etcdstore, each subtest on a prefix of its own.
func TestStoreConformanceOverEtcd(t *testing.T) {
	cli := etcdClient(t)
	prefixes := servedStores[string]{}
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, item]{
		New: func(t *testing.T) informer.Store[string, item] {
			p := uniquePrefix(t)
			c := served(t, must.Do(etcdstore.New[item](cli, p)))
			prefixes[c] = p
			return c
		},
		Expire: func(ctx context.Context, s informer.Store[string, item]) error {
			return compact(ctx, cli, prefixes[s])
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: itemValue,
	})
}

// TestSourceConformanceOverEtcdWithUndecodableValues runs the Source suite
// on a Client of a Server of etcdstore written with plain etcd puts, bad
// values included: etcdstore reports them as bad entries, the Server
// passes them on, and so must the Client.
func TestSourceConformanceOverEtcdWithUndecodableValues(t *testing.T) {
	cli := etcdClient(t)
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			p := uniquePrefix(t)
			put := func(ctx context.Context, key, data string) error {
				_, err := cli.Put(ctx, p+key, data)
				return err
			}
			return sourcetest.Backend[string, item]{
				Source: served(t, must.Do(etcdstore.New[item](cli, p))),
				Put: func(ctx context.Context, key string, v item) error {
					return put(ctx, key, fmt.Sprintf(`{"n":%d,"s":%q}`, v.N, v.S))
				},
				Delete: func(ctx context.Context, key string) error {
					_, err := cli.Delete(ctx, p+key)
					return err
				},
				Expire:         func(ctx context.Context) error { return compact(ctx, cli, p) },
				PutUndecodable: func(ctx context.Context, key string) error { return put(ctx, key, "42") },
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: itemValue,
	})
}

var collections atomic.Int64

// TestStoreConformanceOverPostgres runs the Store suite on a Client of a
// Server of pgstore, each subtest on a collection of its own in a schema
// of this test's.
func TestStoreConformanceOverPostgres(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), testserver.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	schema := fmt.Sprintf("cvt_httpstore_%d", time.Now().UnixNano())
	require.NoError(t, pgstore.Setup(t.Context(), pool, schema))
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
	db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
	t.Cleanup(db.Close)
	stores := servedStores[*pgstore.Store[item]]{}
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, item]{
		New: func(t *testing.T) informer.Store[string, item] {
			s := must.Do(pgstore.New[item](db, fmt.Sprintf("c%d", collections.Add(1))))
			c := served(t, s)
			stores[c] = s
			return c
		},
		Expire: func(ctx context.Context, s informer.Store[string, item]) error {
			_, err := stores[s].Compact(ctx, 0)
			return err
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: itemValue,
	})
}
