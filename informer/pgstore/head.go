package pgstore

import (
	"context"

	"github.com/converge-go/converge/informer"
)

// Compile-time proof that both Sources tell their store's head revision
// (the debug pages' "store head" and "lag").
var (
	_ informer.HeadRevisioner = (*Store[struct{}])(nil)
	_ informer.HeadRevisioner = (*TableSource[struct{}])(nil)
)

// Revision returns the newest revision committed in the DB's schema, by
// any collection (an informer's revision moves past other collections'
// changes too, on bookmarks), or the compaction revision if the log holds
// nothing above it: one backward probe of the log's primary key. An
// informer whose LastRevision is below it has changes still to receive, or
// is waiting for a hole below them to be resolved; one at it is level.
// Revisions taken by transactions that have not committed do not count.
func (s *Store[V]) Revision(ctx context.Context) (informer.Revision, error) {
	var head, compacted int64
	if err := s.pool.QueryRow(ctx, s.q.head).Scan(&head, &compacted); err != nil {
		return 0, s.wrap("revision", "", err)
	}
	return informer.Revision(head), nil
}

// Revision returns the newest revision committed in the DB's schema, as
// Store.Revision does.
func (t *TableSource[V]) Revision(ctx context.Context) (informer.Revision, error) {
	return t.s.Revision(ctx)
}
