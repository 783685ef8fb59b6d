package etcdlock_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/converge-go/converge/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns a client of the single-node test etcd, closed when the
// test ends. Its logger is a no-op, as elsewhere in this repository.
func newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   testserver.Etcd(t),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// uniqueKey returns a lock key no other test (or earlier run) uses.
func uniqueKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "/converge-test/leader/" + name + "-" + hex.EncodeToString(b)
}
