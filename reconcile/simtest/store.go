package simtest

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// Wrap returns store as process p sees it: reads, lists and watches pass
// through; every Create, Update and Delete is a numbered write of the run,
// at which the schedule may crash p (after the write commits, so the
// store holds it and the process never learns it did). Writes of a crashed
// process fail with ErrCrashed and write nothing. Give the wrapper to
// informers and reconcilers alike; write the workload to the raw store.
func Wrap[K comparable, V any](p *Process, name string, store *memstore.Store[K, V]) informer.Store[K, V] {
	return &wrapped[K, V]{Store: store, p: p, name: name}
}

type wrapped[K comparable, V any] struct {
	*memstore.Store[K, V]
	p    *Process
	name string
}

// Compile-time proof that the wrapper is a Store.
var _ informer.Store[string, int] = (*wrapped[string, int])(nil)

func (s *wrapped[K, V]) Create(ctx context.Context, key K, v V) (informer.Revision, error) {
	return s.write(ctx, "Create", key, func() (informer.Revision, error) { return s.Store.Create(ctx, key, v) })
}

func (s *wrapped[K, V]) Update(ctx context.Context, key K, v V, rev informer.Revision) (informer.Revision, error) {
	return s.write(ctx, "Update", key, func() (informer.Revision, error) { return s.Store.Update(ctx, key, v, rev) })
}

func (s *wrapped[K, V]) Delete(ctx context.Context, key K, rev informer.Revision) (informer.Revision, error) {
	return s.write(ctx, "Delete", key, func() (informer.Revision, error) { return s.Store.Delete(ctx, key, rev) })
}

// write is the hook every write goes through: it numbers the write,
// records it for the report, and crashes the process after it if the
// schedule says so.
func (s *wrapped[K, V]) write(ctx context.Context, op string, key K, do func() (informer.Revision, error)) (informer.Revision, error) {
	p := s.p
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.dead.Load() {
		return 0, ErrCrashed
	}
	rev, err := do()
	who, _ := ctx.Value(reconcilingKey{}).(string)
	n, crash, over := p.run.wrote(fmt.Sprintf("%s %s/%v", op, s.name, key), who, err)
	if over {
		p.kill()
		return 0, ErrCrashed
	}
	if crash {
		p.crash()
		return 0, fmt.Errorf("%w after write %d", ErrCrashed, n)
	}
	return rev, err
}
