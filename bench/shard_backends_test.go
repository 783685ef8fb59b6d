package bench

import (
	"os"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/pglock"
	"github.com/converge-go/converge/leader/shard"
)

// shardBackends are the lock backends the sharding scenarios run over:
// memory, and etcd and PostgreSQL when the servers' environment is set
// (scripts/servers.sh env); each returns fresh locks for one cluster,
// released when b ends.
var shardBackends = []struct {
	name  string
	locks func(*testing.B) shard.Backend
}{
	{"mem", func(*testing.B) shard.Backend { return memlock.NewLocks() }},
	{"etcd", func(b *testing.B) shard.Backend {
		if os.Getenv(testserver.EtcdEndpointsEnv) == "" && !testserver.Integration() {
			b.Skipf("SKIPPED: %s is not set: run scripts/servers.sh start; eval \"$(scripts/servers.sh env)\"", testserver.EtcdEndpointsEnv)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(b), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		return etcdlock.NewLocks(cli, "/converge-bench/shard/"+strconv.FormatInt(time.Now().UnixNano(), 36)+"/")
	}},
	{"pg", func(b *testing.B) shard.Backend {
		pool := pgBenchPool(b)
		locks := pglock.NewLocks(pool)
		if err := locks.EnsureSchema(b.Context()); err != nil {
			b.Fatal(err)
		}
		return locks
	}},
}
