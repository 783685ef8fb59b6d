package etcdstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
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
			return must.Do(etcdstore.New[item](cli, uniquePrefix(t)))
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
		Value:             func(i int) item { return conformanceValue(i) },
	})
}

func conformanceValue(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} }

// TestSourceConformanceWithBlindWrites runs the Source suite with the store
// written behind the Source's back by plain etcd puts, as another program
// or etcdctl would, bad values included: the Store suite writes through
// Get, which fails on a bad value, so it cannot fix one. Not parallel, for
// TestStoreConformance's reason.
func TestSourceConformanceWithBlindWrites(t *testing.T) {
	cli := etcdClient(t)
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			prefix := uniquePrefix(t)
			w := &rawWriter{cli, prefix}
			return sourcetest.Backend[string, item]{
				Source: must.Do(etcdstore.New[item](cli, prefix)),
				Put: func(ctx context.Context, key string, v item) error {
					_, err := w.Put(ctx, key, v)
					return err
				},
				Delete: func(ctx context.Context, key string) error {
					_, _, err := w.Delete(ctx, key)
					return err
				},
				Expire: func(ctx context.Context) error {
					resp, err := cli.Get(ctx, prefix)
					if err != nil {
						return err
					}
					_, err = cli.Compact(ctx, resp.Header.Revision)
					return err
				},
				// A JSON number where item is an object: valid JSON that
				// the codec rejects, as a writer of another version might
				// produce.
				PutUndecodable: func(ctx context.Context, key string) error {
					_, err := cli.Put(ctx, prefix+key, "42")
					return err
				},
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: conformanceValue,
	})
}
