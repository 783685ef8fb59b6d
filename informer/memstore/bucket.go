package memstore

import (
	"context"

	"github.com/converge-go/converge/informer"
)

// Buckets is a Store seen as an informer.BucketSource: ListBuckets lists
// the keys that bucketOf puts in the given buckets. Use it with
// informer.Bucketed for a sharded controller's informer in tests; the
// filtering happens in this process, where the Store holds every key
// anyway.
type Buckets[K comparable, V any] struct {
	*Store[K, V]
	bucketOf func(K) int
}

// WithBuckets returns s as a BucketSource whose keys fall into buckets by
// bucketOf. It panics on a nil s or bucketOf.
func WithBuckets[K comparable, V any](s *Store[K, V], bucketOf func(K) int) *Buckets[K, V] {
	if s == nil || bucketOf == nil {
		panic("memstore.WithBuckets: nil store or bucket function")
	}
	return &Buckets[K, V]{Store: s, bucketOf: bucketOf}
}

// ListBuckets returns the entries of the given buckets, as one snapshot,
// and its revision.
func (s *Buckets[K, V]) ListBuckets(ctx context.Context, buckets []int) ([]informer.Entry[K, V], informer.Revision, error) {
	all, rev, err := s.List(ctx)
	if err != nil {
		return nil, 0, err
	}
	want := make(map[int]bool, len(buckets))
	for _, b := range buckets {
		want[b] = true
	}
	out := all[:0]
	for _, e := range all {
		if want[s.bucketOf(e.Key)] {
			out = append(out, e)
		}
	}
	return out, rev, nil
}
