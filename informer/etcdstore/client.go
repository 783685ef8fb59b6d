package etcdstore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
)

// ErrConflict is returned by Client.PutIf when the key's mod revision is not
// the expected one: someone else wrote or deleted it first (or, for an
// expected revision of 0, it already exists).
var ErrConflict = errors.New("etcd: revision conflict")

// Client reads and writes typed values under a prefix: the same keys,
// encoding and revisions a Source with that prefix and codec sees. It is
// safe for concurrent use; the etcd client stays the caller's to close.
type Client[V any] struct {
	kv     clientv3.KV
	prefix string
	codec  Codec[V]
}

// NewClient returns a Client for the keys under prefix. A nil codec means
// JSON[V].
func NewClient[V any](client *clientv3.Client, prefix string, codec Codec[V]) *Client[V] {
	if codec == nil {
		codec = JSON[V]{}
	}
	return &Client[V]{kv: client.KV, prefix: prefix, codec: codec}
}

// Get returns key's value and mod revision (the revision to pass to PutIf),
// or ok false if the key does not exist. A value that does not decode is an
// error wrapping a *DecodeError.
func (c *Client[V]) Get(ctx context.Context, key string) (v V, rev informer.Revision, ok bool, err error) {
	resp, err := c.kv.Get(ctx, c.prefix+key)
	if err != nil {
		return v, 0, false, fmt.Errorf("etcd client: get %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return v, 0, false, nil
	}
	kv := resp.Kvs[0]
	v, err = c.codec.Unmarshal(kv.Value)
	if err != nil {
		return v, 0, false, fmt.Errorf("etcd client: get %q: %w", key,
			&DecodeError{Prefix: c.prefix, Key: key, Revision: informer.Revision(kv.ModRevision), Err: err})
	}
	return v, informer.Revision(kv.ModRevision), true, nil
}

// Put sets key to v unconditionally and returns its new mod revision.
func (c *Client[V]) Put(ctx context.Context, key string, v V) (informer.Revision, error) {
	data, err := c.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("etcd client: put %q: encode: %w", key, err)
	}
	resp, err := c.kv.Put(ctx, c.prefix+key, string(data))
	if err != nil {
		return 0, fmt.Errorf("etcd client: put %q: %w", key, err)
	}
	return informer.Revision(resp.Header.Revision), nil
}

// PutIf sets key to v only if its mod revision is still expected (0: only if
// the key does not exist), in one etcd transaction, and returns the new mod
// revision. Otherwise it writes nothing and returns an error matching
// ErrConflict that names the key's current mod revision.
func (c *Client[V]) PutIf(ctx context.Context, key string, v V, expected informer.Revision) (informer.Revision, error) {
	data, err := c.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("etcd client: put %q: encode: %w", key, err)
	}
	k := c.prefix + key
	resp, err := c.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", int64(expected))).
		Then(clientv3.OpPut(k, string(data))).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd client: put %q: %w", key, err)
	}
	if !resp.Succeeded {
		var current int64
		if rs := resp.Responses; len(rs) == 1 && len(rs[0].GetResponseRange().GetKvs()) == 1 {
			current = rs[0].GetResponseRange().GetKvs()[0].ModRevision
		}
		return 0, fmt.Errorf("etcd client: put %q: expected mod revision %d, found %d: %w",
			key, expected, current, ErrConflict)
	}
	return informer.Revision(resp.Header.Revision), nil
}

// Delete removes key and returns the store's revision after it (the
// delete's own revision if the key existed) and whether it existed, like
// the memory store's Delete: a controller that waits until its informer has
// seen its own write needs that revision.
func (c *Client[V]) Delete(ctx context.Context, key string) (informer.Revision, bool, error) {
	resp, err := c.kv.Delete(ctx, c.prefix+key)
	if err != nil {
		return 0, false, fmt.Errorf("etcd client: delete %q: %w", key, err)
	}
	return informer.Revision(resp.Header.Revision), resp.Deleted > 0, nil
}
