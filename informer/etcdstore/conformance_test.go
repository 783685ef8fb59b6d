package etcdstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/sourcetest"
)

// TestSourceConformance runs the Source conformance suite against the real
// single-node etcd (skipped without one, failed with CONVERGE_INTEGRATION=1),
// each subtest on a prefix of its own. It is not parallel: Expire compacts
// the whole server, which would expire other tests' watches.
func TestSourceConformance(t *testing.T) {
	cli := etcdClient(t)
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			prefix := uniquePrefix(t)
			c := etcdstore.NewClient[item](cli, prefix, nil)
			return sourcetest.Backend[string, item]{
				Source: etcdstore.NewSource[item](cli, prefix),
				Put: func(ctx context.Context, k string, v item) error {
					_, err := c.Put(ctx, k, v)
					return err
				},
				Delete: func(ctx context.Context, k string) error {
					_, _, err := c.Delete(ctx, k)
					return err
				},
				// Compact to the store's current revision, read from the
				// header of a one-key Get.
				Expire: func(ctx context.Context) error {
					resp, err := cli.Get(ctx, prefix)
					if err != nil {
						return err
					}
					_, err = cli.Compact(ctx, resp.Header.Revision)
					return err
				},
				// The watch does not ask for the previous value (see the
				// package doc): deletes carry the zero item.
				DeletesCarryValue: false,
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}
