package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/leader/shard"
)

// Buckets is a Store whose keys are laid out by bucket, so that a sharded
// controller's replica can list only its buckets (an informer.BucketSource):
// the key k lives at the etcd key
//
//	<prefix><b>/<k>, with b = shard.BucketOf(k, buckets) in decimal
//
// (FNV-1a-64 of k's bytes modulo buckets; see leader/shard). Each bucket is
// one etcd range. Entries, events, reads and writes use k; every writer of
// the prefix must use the layout (a Buckets, or the formula above), and
// buckets must equal the sharded controller's shard.Config.Buckets.
// A key under the prefix that does not fit the layout is skipped by List
// and Watch. A value that does not decode is an entry or Put of its key
// with Err set, as with a Store; its *DecodeError names the etcd key
// relative to the prefix, "<b>/<k>", which is where to fix it.
type Buckets[V any] struct {
	raw     *Store[V] // keys "<b>/<k>"
	buckets int
}

var (
	_ informer.Store[string, struct{}]        = (*Buckets[struct{}])(nil)
	_ informer.BucketSource[string, struct{}] = (*Buckets[struct{}])(nil)
)

// NewBuckets returns a Buckets for the keys under prefix spread over
// buckets buckets, with New's options. It returns an error as New does, and
// for a buckets that is not positive.
func NewBuckets[V any](client *clientv3.Client, prefix string, buckets int, opts ...Option[V]) (*Buckets[V], error) {
	if buckets <= 0 {
		return nil, fmt.Errorf("etcdstore.NewBuckets(%q, %d): buckets must be positive", prefix, buckets)
	}
	raw, err := newStore("etcdstore.NewBuckets", client, prefix, opts)
	if err != nil {
		return nil, err
	}
	return &Buckets[V]{raw: raw, buckets: buckets}, nil
}

// BucketOf returns key's bucket: shard.BucketOf(key, buckets).
func (s *Buckets[V]) BucketOf(key string) int { return shard.BucketOf(key, s.buckets) }

// rawKey is key's key in the raw Store.
func (s *Buckets[V]) rawKey(key string) string {
	return strconv.Itoa(s.BucketOf(key)) + "/" + key
}

// key is the key a raw key stands for, and whether it fits the layout.
func (s *Buckets[V]) key(raw string) (string, bool) {
	b, k, ok := strings.Cut(raw, "/")
	return k, ok && b == strconv.Itoa(shard.BucketOf(k, s.buckets))
}

// translate turns raw entries into entries with their keys, in place.
func (s *Buckets[V]) translate(entries []informer.Entry[string, V]) []informer.Entry[string, V] {
	out := entries[:0]
	for _, e := range entries {
		if k, ok := s.key(e.Key); ok {
			e.Key = k
			out = append(out, e)
		}
	}
	return out
}

// List returns every bucket's entries, as Store.List does.
func (s *Buckets[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	entries, rev, err := s.raw.List(ctx)
	return s.translate(entries), rev, err
}

// ListBuckets returns the entries of the given buckets: one range read per
// bucket, the first linearizable and the others at its revision, so that
// together they are one snapshot. It fails with an error matching
// informer.ErrRevisionExpired if that revision is compacted meanwhile.
func (s *Buckets[V]) ListBuckets(ctx context.Context, buckets []int) ([]informer.Entry[string, V], informer.Revision, error) {
	var (
		rev int64
		out []informer.Entry[string, V]
	)
	if len(buckets) == 0 {
		r, err := s.raw.Revision(ctx)
		return nil, r, err
	}
	for _, b := range buckets {
		if b < 0 || b >= s.buckets {
			return nil, 0, fmt.Errorf("etcd source %q: bucket %d out of range [0, %d)", s.raw.prefix, b, s.buckets)
		}
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.raw.client.Get(ctx, s.raw.prefix+strconv.Itoa(b)+"/", opts...)
		if err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				err = fmt.Errorf("%w: %w", informer.ErrRevisionExpired, err)
			}
			return nil, 0, fmt.Errorf("etcd source %q: list bucket %d: %w", s.raw.prefix, b, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		entries, err := s.raw.decodeAll(ctx, resp.Kvs)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, s.translate(entries)...)
	}
	return out, informer.Revision(rev), nil
}

// Watch watches every bucket, as Store.Watch does.
func (s *Buckets[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	return s.raw.Watch(ctx, after, func(ev informer.Event[string, V]) error {
		if ev.Type != informer.Bookmark {
			k, ok := s.key(ev.Key)
			if !ok {
				return nil
			}
			ev.Key = k
		}
		return emit(ev)
	})
}

// Get reads key, as Store.Get does.
func (s *Buckets[V]) Get(ctx context.Context, key string) (V, informer.Revision, bool, error) {
	return s.raw.Get(ctx, s.rawKey(key))
}

// Create creates key, as Store.Create does.
func (s *Buckets[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	return s.raw.Create(ctx, s.rawKey(key), v)
}

// Update writes key at rev, as Store.Update does.
func (s *Buckets[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	return s.raw.Update(ctx, s.rawKey(key), v, rev)
}

// Delete deletes key at rev, as Store.Delete does.
func (s *Buckets[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	return s.raw.Delete(ctx, s.rawKey(key), rev)
}
