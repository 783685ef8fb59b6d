package memstore

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/informer"
)

// watchBatch is the most changes Watch copies out of the history per lock
// hold: enough to amortise the locking, few enough that a watcher far behind
// does not hold writers up for long.
const watchBatch = 256

// Watch calls emit for every change with a revision greater than after, in
// revision order, one event per revision, and then for every later change as
// it happens, until ctx is done (it returns ctx.Err()), emit returns an error
// (it returns that error) or the watch expires.
//
// It returns an error that errors.Is informer.ErrRevisionExpired if after is
// below the oldest revision the history can resume from (see Compact and
// WithHistory), if after is beyond the current revision (it was issued by
// another store, such as this program's before a restart), or if the watch
// falls that far behind while it runs because emit is slower than the
// writers. Events emitted before an expiry were all correct.
//
// emit runs on the caller's goroutine with no lock held, so it may call the
// store, writes included. Watch starts no goroutine.
func (s *Store[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	batch := make([]change[K, V], 0, watchBatch)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var (
			wake <-chan struct{}
			err  error
		)
		batch, wake, err = s.next(after, batch[:0])
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-wake:
			}
			continue
		}
		for i := range batch {
			c := &batch[i]
			if err := emit(informer.Event[K, V]{Type: c.typ, Key: c.key, Value: c.value, Revision: c.rev}); err != nil {
				return err
			}
		}
		after = batch[len(batch)-1].rev
		clear(batch) // let the values go while emit's caller waits
	}
}

// next appends to batch the changes after revision after, up to
// watchBatch of them. If there are none, it returns a channel that is closed
// by the next write. It fails if after is outside the history.
func (s *Store[K, V]) next(after informer.Revision, batch []change[K, V]) ([]change[K, V], <-chan struct{}, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if floor := s.floor(); after < floor {
		return batch, nil, fmt.Errorf("memory: watch after revision %d: history starts after revision %d: %w", after, floor, informer.ErrRevisionExpired)
	}
	if after > s.rev {
		return batch, nil, fmt.Errorf("memory: watch after revision %d: store is at revision %d: %w", after, s.rev, informer.ErrRevisionExpired)
	}
	if after == s.rev {
		// Set under the read lock, which excludes writers: the next
		// write sees it and closes this very channel.
		s.waiting.Store(true)
		return batch, s.wake, nil
	}
	last := min(s.rev, after+watchBatch)
	for r := after + 1; r <= last; r++ {
		batch = append(batch, *s.log.at(s.slot(r)))
	}
	return batch, nil, nil
}
