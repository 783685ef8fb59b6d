package etcdstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/sourcetest"
)

// TestStoreConformance runs the Store conformance suite, the Source suite
// included, against the real single-node etcd (skipped without one, failed
// with CONVERGE_INTEGRATION=1), each subtest on a prefix of its own. It is
// not parallel: Expire compacts the whole server, which would expire other
// tests' watches.
func TestStoreConformance(t *testing.T) {
	cli := etcdClient(t)
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, item]{
		New: func(t *testing.T) informer.Store[string, item] {
			return etcdstore.New[item](cli, uniquePrefix(t))
		},
		// Compact to the store's current revision, read from the header
		// of a one-key Get.
		Expire: func(ctx context.Context, s informer.Store[string, item]) error {
			resp, err := cli.Get(ctx, s.(*etcdstore.Store[item]).Prefix())
			if err != nil {
				return err
			}
			_, err = cli.Compact(ctx, resp.Header.Revision)
			return err
		},
		// The watch does not ask for the previous value (see the package
		// doc): deletes carry the zero item.
		DeletesCarryValue: false,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}
