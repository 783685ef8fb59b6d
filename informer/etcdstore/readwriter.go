package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
)

// Get returns key's value and mod revision, or ok false and a nil error if
// key does not exist, with one linearizable read, so that it sees every
// write that returned before it. A value the codec cannot decode is an
// error wrapping a *DecodeError, as long as the key holds it: Get reads one
// key, so unlike List and Watch it has nothing else to hand over. The
// error's Revision lets a caller overwrite the value with Update (or
// remove it with Delete). It is neither counted in DecodeErrors nor passed
// to the WithDecodeErrorHandler callback, which are about the informer's
// List and Watch. A done ctx fails it before any round trip.
func (s *Store[V]) Get(ctx context.Context, key string) (v V, rev informer.Revision, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, 0, false, err
	}
	resp, err := s.client.Get(ctx, s.prefix+key)
	if err != nil {
		return v, 0, false, fmt.Errorf("etcd store %q: get %q: %w", s.prefix, key, err)
	}
	if len(resp.Kvs) == 0 {
		return v, 0, false, nil
	}
	kv := resp.Kvs[0]
	v, err = s.opts.codec.Unmarshal(kv.Value)
	if err != nil {
		var zero V
		return zero, 0, false, fmt.Errorf("etcd store %q: get %q: %w", s.prefix, key,
			&DecodeError{Prefix: s.prefix, Key: key, Revision: informer.Revision(kv.ModRevision), Err: err})
	}
	return v, informer.Revision(kv.ModRevision), true, nil
}

// Create sets key to v only if key does not exist, in one transaction (If
// the key's mod revision is 0), and returns the write's revision. If key
// exists it writes nothing and returns an error wrapping
// informer.ErrConflict that names the key's mod revision. A done ctx fails
// it before any round trip.
func (s *Store[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.putIf(ctx, "create", key, v, 0)
}

// Update sets key to v only if its mod revision is still rev, in one
// transaction, and returns the write's revision (above rev). Otherwise it
// writes nothing and returns an error wrapping informer.ErrConflict that
// names the key's mod revision (0: gone). rev 0 is a conflict without a
// round trip: in etcd, mod revision 0 means that the key does not exist,
// so the transaction would create it. A done ctx fails it before any round
// trip.
func (s *Store[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("etcd store %q: update %q at revision 0 (use Create): %w", s.prefix, key, informer.ErrConflict)
	}
	return s.putIf(ctx, "update", key, v, rev)
}

// putIf writes v at key if its mod revision is rev (0: absent), for op.
func (s *Store[V]) putIf(ctx context.Context, op, key string, v V, rev informer.Revision) (informer.Revision, error) {
	data, err := s.opts.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("etcd store %q: %s %q: encode: %w", s.prefix, op, key, err)
	}
	k := s.prefix + key
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", int64(rev))).
		Then(clientv3.OpPut(k, string(data))).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd store %q: %s %q: %w", s.prefix, op, key, err)
	}
	if !resp.Succeeded {
		return 0, s.conflict(op, key, rev, resp, 0)
	}
	return informer.Revision(resp.Header.Revision), nil
}

// Delete removes key. With rev 0 it removes key whatever its revision and
// returns the delete's revision, or 0 and a nil error if key did not exist.
// With rev above 0 it removes key only if its mod revision is still rev, in
// one transaction, and otherwise (key changed or is gone) writes nothing
// and returns an error wrapping informer.ErrConflict. A done ctx fails it
// before any round trip.
func (s *Store[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	k := s.prefix + key
	if rev == 0 {
		resp, err := s.client.Delete(ctx, k)
		if err != nil {
			return 0, fmt.Errorf("etcd store %q: delete %q: %w", s.prefix, key, err)
		}
		if resp.Deleted == 0 {
			return 0, nil // nothing deleted: the header's revision is no write's
		}
		return informer.Revision(resp.Header.Revision), nil
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", int64(rev))).
		Then(clientv3.OpDelete(k)).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd store %q: delete %q: %w", s.prefix, key, err)
	}
	if !resp.Succeeded {
		return 0, s.conflict("delete", key, rev, resp, 0)
	}
	return informer.Revision(resp.Header.Revision), nil
}

// conflict is the error of a failed transaction of op at revision rev,
// naming the key's mod revision that the Else branch read as response i
// of resp (0: absent).
func (s *Store[V]) conflict(op, key string, rev informer.Revision, resp *clientv3.TxnResponse, i int) error {
	var current int64
	if rs := resp.Responses; len(rs) > i {
		if kvs := rs[i].GetResponseRange().GetKvs(); len(kvs) == 1 {
			current = kvs[0].ModRevision
		}
	}
	return fmt.Errorf("etcd store %q: %s %q at revision %d: the key is at mod revision %d: %w",
		s.prefix, op, key, rev, current, informer.ErrConflict)
}
