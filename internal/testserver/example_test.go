package testserver_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/internal/testserver"
)

// An integration test asks for its server: without one the test is
// skipped, naming the variable to set, unless CONVERGE_INTEGRATION=1,
// when it fails (a CI run never passes by skipping).
func ExampleEtcd() {
	test := func(t *testing.T) { // func TestWatchShouldResumeAfterACompaction(t *testing.T)
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   testserver.Etcd(t),
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		// ... keys under a prefix unique to the test
	}
	_ = test
}
