package etcdlock

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/leader"
)

// Delete removes the record of the lock called name if its Version (the
// key's mod revision) is still version, in one transaction, for
// leader/shard's clean-up of departed members. It returns nil if there is
// no record and leader.ErrConflict if the record has changed.
func (s *Locks) Delete(ctx context.Context, name string, version int64) error {
	key := s.root + name
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", version)).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd:%s: delete: %w", key, err)
	}
	if !resp.Succeeded && resp.Responses[0].GetResponseRange().Count > 0 {
		return leader.ErrConflict
	}
	return nil
}
