package etcdstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
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

	entries, rev, err := etcdstore.New[item](cli, prefix).List(ctx)
	require.NoError(t, err)
	assert.NotZero(t, rev)
	require.Len(t, entries, listKeys)
	for i, e := range entries {
		want := informer.Entry[string, item]{Key: fmt.Sprintf("k%05d", i), Value: item{N: i}}
		if !assert.Equal(t, want, e, "entry %d", i) {
			break
		}
	}
}

// Not parallel: it sets GOMAXPROCS.
func TestListShouldFailWithTheFirstUndecodableValueInKeyOrderWhateverTheDecodersMeetFirst(t *testing.T) {
	cli := etcdClient(t)
	ctx := ctxFor(t, time.Minute)
	prefix := uniquePrefix(t)
	// Bad values in several chunks, the last chunk's first: a decoder that
	// reached a later one first must not win.
	putMany(ctx, t, cli, prefix, map[int]string{1199: "{", 700: "not json", 701: "[", 1000: "x"})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var mu sync.Mutex
	var handled []string
	src := etcdstore.New(cli, prefix, etcdstore.WithDecodeErrorHandler[item](func(key string, _ error) {
		mu.Lock()
		handled = append(handled, key)
		mu.Unlock()
	}))

	for range 5 { // the decoders race differently each time
		entries, _, err := src.List(ctx)
		var decodeErr *etcdstore.DecodeError
		require.ErrorAs(t, err, &decodeErr)
		assert.Equal(t, "k00700", decodeErr.Key)
		var syntaxErr *json.SyntaxError
		assert.ErrorAs(t, err, &syntaxErr, "the error is the codec's for that value")
		assert.Nil(t, entries)
	}
	assert.EqualValues(t, 5, src.DecodeErrors(), "one decode error per List")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"k00700", "k00700", "k00700", "k00700", "k00700"}, handled)
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
	src := etcdstore.New(cli, prefix, etcdstore.WithCodec[item](cancelingCodec{cancel: func() { once.Do(cancel) }}))

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
