package etcdstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// listKeys is enough values for List to split the decoding between
// goroutines (it claims 256 at a time).
const listKeys = 1200

// putMany writes listKeys keys "k00000".. under prefix, each item{N: i},
// except that bad maps some indexes to raw values of their own.
func putMany(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, bad map[int]string) {
	t.Helper()
	var ops []clientv3.Op
	flush := func() {
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		require.NoError(t, err)
		ops = ops[:0]
	}
	for i := range listKeys {
		v, ok := bad[i]
		if !ok {
			data, err := json.Marshal(item{N: i})
			require.NoError(t, err)
			v = string(data)
		}
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sk%05d", prefix, i), v))
		if len(ops) == 100 { // under etcd's default limit of 128 ops per txn
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
}

// Not parallel: it sets GOMAXPROCS.
func TestListShouldReturnEveryValueInKeyOrderWhenDecodingInParallel(t *testing.T) {
	cli := etcdClient(t)
	ctx := ctxFor(t, time.Minute)
	prefix := uniquePrefix(t)
	putMany(ctx, t, cli, prefix, nil)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // parallel even on one core

	entries, rev, err := must.Do(etcdstore.New[item](cli, prefix)).List(ctx)
	require.NoError(t, err)
	assert.NotZero(t, rev)
	modRevs := modRevisions(ctx, t, cli, prefix)
	require.Len(t, entries, listKeys)
	for i, e := range entries {
		key := fmt.Sprintf("k%05d", i)
		want := informer.Entry[string, item]{Key: key, Value: item{N: i}, Revision: modRevs[key]}
		if !assert.Equal(t, want, e, "entry %d", i) {
			break
		}
	}
}

// Not parallel: it sets GOMAXPROCS.
func TestListShouldReportEveryUndecodableValueInKeyOrderWhateverTheDecodersMeetFirst(t *testing.T) {
	cli := etcdClient(t)
	ctx := ctxFor(t, time.Minute)
	prefix := uniquePrefix(t)
	// Bad values in several chunks, the last chunk's first: the handler
	// must still see them in key order.
	putMany(ctx, t, cli, prefix, map[int]string{1199: "{", 700: "not json", 701: "[", 1000: "x"})
	modRevs := modRevisions(ctx, t, cli, prefix)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	handled := &handledKeys{}
	src := must.Do(etcdstore.New(cli, prefix, handled.option()))

	badKeys := []string{"k00700", "k00701", "k01000", "k01199"}
	for range 5 { // the decoders race differently each time
		entries, _, err := src.List(ctx)
		require.NoError(t, err)
		require.Len(t, entries, listKeys, "every key is listed, the bad ones too")
		var bad []string
		for i, e := range entries {
			key := fmt.Sprintf("k%05d", i)
			require.Equal(t, key, e.Key)
			require.Equal(t, modRevs[key], e.Revision, "key %s", key)
			if e.Err == nil {
				require.Equal(t, item{N: i}, e.Value, "key %s", key)
				continue
			}
			bad = append(bad, key)
			assert.Zero(t, e.Value, "key %s", key)
			var decodeErr *etcdstore.DecodeError
			require.ErrorAs(t, e.Err, &decodeErr)
			assert.Equal(t, etcdstore.DecodeError{Prefix: prefix, Key: key, Revision: e.Revision, Err: decodeErr.Err}, *decodeErr)
			var syntaxErr *json.SyntaxError
			assert.ErrorAs(t, e.Err, &syntaxErr, "the error is the codec's for that value")
		}
		assert.Equal(t, badKeys, bad)
	}
	assert.EqualValues(t, 5*len(badKeys), src.DecodeErrors(), "each bad value, each List")
	assert.Equal(t, slices.Concat(badKeys, badKeys, badKeys, badKeys, badKeys), handled.get(), "in key order")
}

// modRevisions returns the mod revision of every key under prefix,
// relative to it.
func modRevisions(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) map[string]informer.Revision {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	m := make(map[string]informer.Revision, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[strings.TrimPrefix(string(kv.Key), prefix)] = informer.Revision(kv.ModRevision)
	}
	return m
}

func TestListShouldReturnTheContextErrorWhenCanceledWhileDecoding(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, time.Minute)
	prefix := uniquePrefix(t)
	putMany(ctx, t, cli, prefix, nil)
	// Not derived from ctx, whose deadline would be another error.
	listCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	src := must.Do(etcdstore.New(cli, prefix, etcdstore.WithCodec[item](cancelingCodec{cancel: func() { once.Do(cancel) }})))

	entries, _, err := src.List(listCtx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, entries)
}

// cancelingCodec decodes JSON, calling cancel on its first decode.
type cancelingCodec struct {
	informer.JSON[item]
	cancel func()
}

func (c cancelingCodec) Unmarshal(data []byte) (item, error) {
	c.cancel()
	return c.JSON.Unmarshal(data)
}
