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

// decodeAll decodes kvs into entries in their order, on up to GOMAXPROCS
// goroutines. A list of a million values decodes on one goroutine in about
// as long as the Get that read it took (a JSON value of 550 B is ~2µs), so
// the initial sync waited on one core while the others idled.
//
// If values do not decode, it fails with the first of them in kvs's order,
// as a serial decode would, so that the error and the decode-error handler
// (called on the caller's goroutine) do not depend on scheduling. It returns
// ctx's error if ctx ends first.
func (s *Store[V]) decodeAll(ctx context.Context, kvs []*mvccpb.KeyValue) ([]informer.Entry[string, V], error) {
	entries := make([]informer.Entry[string, V], len(kvs))
	workers := min(runtime.GOMAXPROCS(0), (len(kvs)+decodeChunk-1)/decodeChunk)
	var (
		next    atomic.Int64 // the first index not yet claimed
		bad     atomic.Int64 // the lowest index that failed, or len(kvs)
		errAt   sync.Map     // index -> the codec's error
		stopped atomic.Bool  // ctx ended
	)
	bad.Store(int64(len(kvs)))
	decode := func() {
		for {
			if ctx.Err() != nil {
				stopped.Store(true)
				return
			}
			from := next.Add(decodeChunk) - decodeChunk
			to := min(from+decodeChunk, int64(len(kvs)))
			if from >= to || from > bad.Load() {
				return
			}
			for i := from; i < to; i++ {
				kv := kvs[i]
				v, err := s.opts.codec.Unmarshal(kv.Value)
				if err != nil {
					errAt.Store(i, err)
					lowerTo(&bad, i)
					break // later values of this chunk cannot be the first
				}
				entries[i] = informer.Entry[string, V]{Key: s.key(kv.Key), Value: v}
			}
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(decode)
	}
	decode()
	wg.Wait()
	if i := bad.Load(); i < int64(len(kvs)) {
		err, _ := errAt.Load(i)
		return nil, s.decodeFailed(s.key(kvs[i].Key), kvs[i].ModRevision, err.(error))
	}
	if stopped.Load() {
		return nil, ctx.Err()
	}
	return entries, nil
}

// lowerTo sets a to v if v is lower.
func lowerTo(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v >= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
