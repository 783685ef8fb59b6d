package memlock

import (
	"context"

	"github.com/converge-go/converge/leader"
)

// Delete removes the record of the lock called name if its Version is
// still version, for leader/shard's clean-up of departed members. It
// returns nil if there is no record, leader.ErrConflict if the record has
// changed, and ctx's error if ctx is done. Versions keep growing after a
// delete, so a record created again never repeats one.
func (s *Locks) Delete(ctx context.Context, name string, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	l := s.locks[name]
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.exists:
		return nil
	case l.rec.Version != version:
		return leader.ErrConflict
	}
	l.rec, l.exists = leader.Record{}, false
	return nil
}
