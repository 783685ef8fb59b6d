package etcdlock

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/leader"
)

// Locks is a set of locks under one etcd key prefix, for leader/shard:
// the lock called name is the key root+name, and List reads the records
// under a prefix in one range read, a consistent snapshot. It is safe for
// concurrent use; the etcd client stays the caller's to close.
type Locks struct {
	client *clientv3.Client
	root   string
}

// NewLocks returns the set of locks whose keys start with root (for
// example "/converge/"). The keys under root should be used for nothing
// else.
func NewLocks(client *clientv3.Client, root string) *Locks {
	return &Locks{client: client, root: root}
}

// Lock returns the lock stored under root+name.
func (s *Locks) Lock(name string) leader.Lock { return NewLock(s.client, s.root+name) }

// List returns the record of every lock whose name starts with prefix, by
// name, read at one revision. A key under the prefix that does not decode
// as a record is an error.
func (s *Locks) List(ctx context.Context, prefix string) (map[string]leader.Record, error) {
	desc := fmt.Sprintf("etcd:%s%s*@%s", s.root, prefix, strings.Join(s.client.Endpoints(), ","))
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: list: %w", desc, err)
	}
	resp, err := s.client.KV.Get(ctx, s.root+prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("%s: list: %w", desc, err)
	}
	out := make(map[string]leader.Record, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := decode(kv.Value, kv.ModRevision)
		if err != nil {
			return nil, fmt.Errorf("%s: list: key %q: decode: %w", desc, kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), s.root)] = r
	}
	return out, nil
}
