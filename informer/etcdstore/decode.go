package etcdstore

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/listdecode"
)

// decodeAll decodes kvs into entries in their order, each with its mod
// revision, on up to GOMAXPROCS goroutines: a list of a million values
// decodes on one goroutine in about as long as the Get that read it took,
// so the initial sync waited on one core while the others idled.
//
// A value that does not decode is an entry with Err set to a *DecodeError
// and no value. The decode-error handler is called for those on the
// caller's goroutine, in kvs's order, after the decoders are done, so that
// neither the calls nor their order depend on scheduling. It returns ctx's
// error if ctx ends first.
func (s *Store[V]) decodeAll(ctx context.Context, kvs []*mvccpb.KeyValue) ([]informer.Entry[string, V], error) {
	dec := listdecode.New(ctx, func(_ string, _ informer.Revision, data []byte) (V, error) {
		// The codec's error for now; wrapped below, in order.
		return s.opts.codec.Unmarshal(data)
	})
	for _, kv := range kvs {
		dec.Add(s.key(kv.Key), informer.Revision(kv.ModRevision), kv.Value)
	}
	entries, bad, err := dec.Finish()
	if err != nil {
		return nil, err
	}
	if bad > 0 {
		for i := range entries {
			if e := &entries[i]; e.Err != nil {
				e.Err = s.decodeFailed(e.Key, int64(e.Revision), e.Err)
			}
		}
	}
	return entries, nil
}
