package etcdstore

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
)

// FencedStore is a Store (or Buckets) whose writes are made under a
// Fence: see Store.Fenced.
type FencedStore[V any] struct {
	// Store gives Get, List and Watch: the unfenced store's.
	informer.Store[string, V]
	raw    *Store[V]
	rawKey func(string) string
	fence  Fence
}

var _ informer.Store[string, struct{}] = (*FencedStore[struct{}])(nil)

// Fenced returns a Store of the same keys whose Create, Update and Delete
// are each one transaction that also requires f (see Fence): the write
// commits only if the fence holds at most f.Token (and, as for s, the key
// is at the expected revision), and raises the fence to f.Token. A write
// refused by the fence writes nothing and returns an error wrapping
// ErrFenced; a write refused by the key's revision is a conflict
// (informer.ErrConflict), as for s. Get, List and Watch are s's. It fails
// for a Fence without a Key, a token of math.MaxUint64, or a fence key
// under s's prefix (an informer of s would see it).
//
// A sharded reconcile makes one per write, from its context:
//
//	b, _ := shard.FromContext(ctx)
//	st, err := store.Fenced(etcdstore.BucketFence("/myapp/fences/", b))
//	_, err = informer.Update(ctx, st, key, change) // ErrFenced: the bucket moved on
func (s *Store[V]) Fenced(f Fence) (*FencedStore[V], error) {
	return fenced[V](s, s, func(k string) string { return k }, f)
}

// Fenced returns a Buckets of the same keys whose writes are made under f,
// as Store.Fenced's are.
func (s *Buckets[V]) Fenced(f Fence) (*FencedStore[V], error) {
	return fenced[V](s, s.raw, s.rawKey, f)
}

func fenced[V any](st informer.Store[string, V], raw *Store[V], rawKey func(string) string, f Fence) (*FencedStore[V], error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if strings.HasPrefix(f.Key, raw.prefix) {
		return nil, fmt.Errorf("etcdstore: %s is under the store's prefix %q: keep fences out of it", f, raw.prefix)
	}
	return &FencedStore[V]{Store: st, raw: raw, rawKey: rawKey, fence: f}, nil
}

// Fence returns the store's fence.
func (s *FencedStore[V]) Fence() Fence { return s.fence }

// Create creates key, as Store.Create does, under the fence.
func (s *FencedStore[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	return s.put(ctx, "create", key, v, 0)
}

// Update writes key at rev, as Store.Update does, under the fence.
func (s *FencedStore[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if rev == 0 {
		return 0, fmt.Errorf("etcd store %q: update %q at revision 0 (use Create): %w", s.raw.prefix, key, informer.ErrConflict)
	}
	return s.put(ctx, "update", key, v, rev)
}

func (s *FencedStore[V]) put(ctx context.Context, op, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	data, err := s.raw.opts.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("etcd store %q: %s %q: encode: %w", s.raw.prefix, op, key, err)
	}
	k := s.raw.prefix + s.rawKey(key)
	return s.txn(ctx, op, key, rev, true, clientv3.OpPut(k, string(data)))
}

// Delete deletes key, as Store.Delete does (rev 0: whatever its
// revision), under the fence.
func (s *FencedStore[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.txn(ctx, "delete", key, rev, rev > 0, clientv3.OpDelete(s.raw.prefix+s.rawKey(key)))
}

// txn commits write (op, on key) under the fence and, if atRev, only if
// key's mod revision is rev (0: absent). It returns the write's revision
// (0 for a delete of a missing key).
func (s *FencedStore[V]) txn(ctx context.Context, op, key string, rev informer.Revision, atRev bool, write clientv3.Op) (informer.Revision, error) {
	k := s.raw.prefix + s.rawKey(key)
	cmps := []clientv3.Cmp{s.fence.If()}
	if atRev {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", int64(rev)))
	}
	for created := false; ; created = true {
		resp, err := s.raw.client.Txn(ctx).If(cmps...).
			Then(s.fence.Raise(), write).
			Else(clientv3.OpGet(s.fence.Key), clientv3.OpGet(k, clientv3.WithKeysOnly())).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("etcd store %q: %s %q: %w", s.raw.prefix, op, key, err)
		}
		if resp.Succeeded {
			if write.IsDelete() && resp.Responses[1].GetResponseDeleteRange().GetDeleted() == 0 {
				return 0, nil // nothing deleted: the header's revision is no write's
			}
			return informer.Revision(resp.Header.Revision), nil
		}
		if missing(resp, 0) && !created {
			if err := s.fence.create(ctx, s.raw.client); err != nil {
				return 0, err
			}
			continue
		}
		if missing(resp, 0) || s.fence.fenced(resp, 0) {
			return 0, fmt.Errorf("etcd store %q: %s %q: %w", s.raw.prefix, op, key, s.fence.refused(resp, 0))
		}
		return 0, s.raw.conflict(op, key, rev, resp, 1)
	}
}
