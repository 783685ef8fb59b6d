package etcdstore

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/converge-go/converge/informer"
)

// decodeChunk is how many values a List decoder claims at a time: large
// enough that claiming costs nothing beside decoding, small enough that the
// decoders finish together.
const decodeChunk = 256

// decodeAll decodes kvs into entries in their order, each with its mod
// revision, on up to GOMAXPROCS goroutines. A list of a million values
// decodes on one goroutine in about as long as the Get that read it took (a
// JSON value of 550 B is ~2µs), so the initial sync waited on one core
// while the others idled.
//
// A value that does not decode is an entry with Err set to a *DecodeError
// and no value. The decode-error handler is called for those on the
// caller's goroutine, in kvs's order, after the decoders are done, so that
// neither the calls nor their order depend on scheduling. It returns ctx's
// error if ctx ends first.
func (s *Store[V]) decodeAll(ctx context.Context, kvs []*mvccpb.KeyValue) ([]informer.Entry[string, V], error) {
	entries := make([]informer.Entry[string, V], len(kvs))
	workers := min(runtime.GOMAXPROCS(0), (len(kvs)+decodeChunk-1)/decodeChunk)
	var (
		next    atomic.Int64 // the first index not yet claimed
		bad     atomic.Bool  // some value did not decode
		stopped atomic.Bool  // ctx ended
	)
	decode := func() {
		for {
			if ctx.Err() != nil {
				stopped.Store(true)
				return
			}
			from := next.Add(decodeChunk) - decodeChunk
			to := min(from+decodeChunk, int64(len(kvs)))
			if from >= to {
				return
			}
			for i := from; i < to; i++ {
				kv := kvs[i]
				e := &entries[i]
				e.Key, e.Revision = s.key(kv.Key), informer.Revision(kv.ModRevision)
				// The codec's error for now; wrapped below, in order.
				if e.Value, e.Err = s.opts.codec.Unmarshal(kv.Value); e.Err != nil {
					bad.Store(true)
				}
			}
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(decode)
	}
	decode()
	wg.Wait()
	if stopped.Load() {
		return nil, ctx.Err()
	}
	if bad.Load() {
		for i := range entries {
			if e := &entries[i]; e.Err != nil {
				var zero V
				e.Value = zero // a codec may return a partial value with its error
				e.Err = s.decodeFailed(e.Key, kvs[i].ModRevision, e.Err)
			}
		}
	}
	return entries, nil
}
