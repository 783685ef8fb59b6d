package etcdstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item is the value type the tests store.
type item struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

// newClient returns an etcd client for endpoints, closed when the test ends.
// Its logger is a no-op: the v3.7 client logs a warning per compacted
// revision otherwise.
func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// etcdClient returns a client of the single-node test etcd.
func etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	return newClient(t, testserver.Etcd(t))
}

// uniquePrefix returns a key prefix no other test (or earlier run) uses.
func uniquePrefix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "/converge-test/" + name + "-" + hex.EncodeToString(b) + "/"
}

// ctxFor returns a context canceled after d or when the test ends.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recorder runs Source.Watch in a goroutine and records what it emits. Stop
// cancels the watch and returns Watch's error.
type recorder struct {
	mu     sync.Mutex
	events []informer.Event[string, item]
	cancel context.CancelFunc
	done   chan error
}

func startWatch(t *testing.T, src informer.Source[string, item], after informer.Revision) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- src.Watch(ctx, after, func(e informer.Event[string, item]) error {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels the watch and returns its error (nil if it ended with
// context.Canceled, as it should).
func (r *recorder) stop() error {
	r.cancel()
	err := <-r.done
	r.done <- err // stop is idempotent
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// snapshot returns the events so far.
func (r *recorder) snapshot() []informer.Event[string, item] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]informer.Event[string, item](nil), r.events...)
}

// lastRevision returns the revision of the last event so far, 0 if none.
func (r *recorder) lastRevision() informer.Revision {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return 0
	}
	return r.events[len(r.events)-1].Revision
}

// apply folds entries and then events into a map, as a cache would.
func apply(entries []informer.Entry[string, item], events []informer.Event[string, item]) map[string]item {
	m := make(map[string]item, len(entries))
	for _, e := range entries {
		m[e.Key] = e.Value
	}
	for _, e := range events {
		switch e.Type {
		case informer.Put:
			m[e.Key] = e.Value
		case informer.Delete:
			delete(m, e.Key)
		}
	}
	return m
}

// rawWriter writes JSON values under a prefix with plain etcd puts and
// deletes: the blind writes, and the writes of another prefix, that tests
// make behind a Store's back (the Store itself only writes with
// compare-and-swap).
type rawWriter struct {
	cli    *clientv3.Client
	prefix string
}

// Put sets key to v and returns the put's revision.
func (w *rawWriter) Put(ctx context.Context, key string, v item) (informer.Revision, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	resp, err := w.cli.Put(ctx, w.prefix+key, string(data))
	if err != nil {
		return 0, err
	}
	return informer.Revision(resp.Header.Revision), nil
}

// Delete removes key and returns the header revision and whether it
// existed.
func (w *rawWriter) Delete(ctx context.Context, key string) (informer.Revision, bool, error) {
	resp, err := w.cli.Delete(ctx, w.prefix+key)
	if err != nil {
		return 0, false, err
	}
	return informer.Revision(resp.Header.Revision), resp.Deleted > 0, nil
}
