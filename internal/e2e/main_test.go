// Package e2e runs one small controller, written against informer.Store,
// unchanged on every backend (the memory store, a real etcd and a real
// PostgreSQL), and checks
// the promises that only hold end to end: it converges, and with a
// finalizer a deletion requested while it was down is still cleaned up.
//
// The etcd and PostgreSQL runs need the test servers (scripts/servers.sh;
// see package internal/testserver): without them they are skipped, with
// CONVERGE_INTEGRATION=1 they fail.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend opens a fresh, empty store of Things. The store outlives the
// controllers a test starts and stops on it, as a real store outlives
// the processes that use it.
type backend struct {
	name string
	open func(t *testing.T) informer.Store[string, Thing]
}

// backends are every store the controller must run on unchanged.
var backends = []backend{
	{"memstore", func(*testing.T) informer.Store[string, Thing] { return must.Do(memstore.New[string, Thing]()) }},
	{"etcdstore", openEtcd},
	{"pgstore", openPostgres},
}

// openEtcd returns an etcdstore on a prefix of its own in the single-node
// test etcd, or skips (fails with CONVERGE_INTEGRATION=1) without one.
func openEtcd(t *testing.T) informer.Store[string, Thing] {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   testserver.Etcd(t),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // the v3.7 client warns per compacted revision otherwise
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return must.Do(etcdstore.New[Thing](cli, "/converge-e2e/"+name+"-"+hex.EncodeToString(b)+"/"))
}

// openPostgres returns a pgstore in a schema of its own in the test
// PostgreSQL, dropped when t ends, or skips (fails with
// CONVERGE_INTEGRATION=1) without one.
func openPostgres(t *testing.T) informer.Store[string, Thing] {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), testserver.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	schema := "converge_e2e_" + hex.EncodeToString(b)
	require.NoError(t, pgstore.Setup(t.Context(), pool, schema))
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
	t.Cleanup(db.Close)
	return must.Do(pgstore.New[Thing](db, "things"))
}

// eachBackend runs test as a subtest per backend.
func eachBackend(t *testing.T, test func(t *testing.T, store informer.Store[string, Thing])) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}
