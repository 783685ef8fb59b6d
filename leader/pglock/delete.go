package pglock

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/converge-go/converge/leader"
)

// Delete removes the row called name if its version is still version, in
// one statement, for leader/shard's clean-up of departed members. It
// returns nil if there is no row and leader.ErrConflict if the row has
// changed. A row created again after a delete restarts at version 1 (see
// Lock), so do not delete the rows of locks whose terms fence writes.
func (s *Locks) Delete(ctx context.Context, name string, version int64) error {
	desc := "postgres:" + s.proto.table + "/" + name
	var left int64
	err := s.pool.QueryRow(ctx, s.del, s.proto.mode, name, version).Scan(&left)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.proto.wrapAs(desc, "delete", err)
	}
	if left > 0 {
		return leader.ErrConflict
	}
	return nil
}
