package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
)

// Compile-time proof that a Store tells its head revision (the debug
// pages' "store head" and "lag").
var _ informer.HeadRevisioner = (*Store[struct{}])(nil)

// Revision returns etcd's current revision: the header of a linearizable,
// count-only read of one key, which costs one round trip to the leader
// whatever the prefix holds. It is the whole cluster's revision, so writes
// under other prefixes move it too: an informer on this Store reaches it
// with the next progress notification (bookmark) even when nothing under
// its prefix changed, and lags it by those writes until then.
func (s *Store[V]) Revision(ctx context.Context) (informer.Revision, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcdstore %q: revision: %w", s.prefix, err)
	}
	return informer.Revision(resp.Header.Revision), nil
}
