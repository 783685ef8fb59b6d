package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// writeOp is one write a writer goroutine makes.
type writeOp struct {
	kind string // put, putIf, delete, deleteIf, compact
	key  string
}

var (
	genWriteOp = rapid.Custom(func(t *rapid.T) writeOp {
		return writeOp{
			kind: rapid.SampledFrom([]string{"put", "put", "putIf", "putIf", "delete", "deleteIf", "compact"}).Draw(t, "kind"),
			key:  rapid.SampledFrom([]string{"a", "b", "c", "d", "e"}).Draw(t, "key"),
		}
	})
	genWriter = rapid.SliceOfN(genWriteOp, 0, 300)
)

// sentinel is the key whose Put tells the mirror that every writer is done.
const sentinel = "done"

// mirror is what an informer does with a Source: List, Watch after the
// listed revision, and on ErrRevisionExpired list again. It checks the
// watch contract as it goes.
type mirror struct {
	s       *memstore.Store[string, int]
	data    map[string]int
	rev     informer.Revision
	relists int
}

// run mirrors s until it has seen the sentinel key.
func (m *mirror) run() error {
	for {
		entries, rev, err := m.s.List(context.Background())
		if err != nil {
			return err
		}
		m.data = make(map[string]int, len(entries))
		for _, e := range entries {
			m.data[e.Key] = e.Value
		}
		m.rev = rev
		if _, ok := m.data[sentinel]; ok {
			return nil
		}
		err = m.s.Watch(context.Background(), m.rev, m.apply)
		switch {
		case errors.Is(err, errStop):
			return nil
		case errors.Is(err, informer.ErrRevisionExpired):
			m.relists++
		default:
			return err
		}
	}
}

func (m *mirror) apply(e event) error {
	if e.Revision != m.rev+1 {
		return fmt.Errorf("event %+v after revision %d: want one event per revision, in order", e, m.rev)
	}
	m.rev = e.Revision
	switch e.Type {
	case informer.Put:
		m.data[e.Key] = e.Value
	case informer.Delete:
		v, ok := m.data[e.Key]
		if !ok || v != e.Value {
			return fmt.Errorf("delete %+v: mirror has %d, %v; want the deleted value", e, v, ok)
		}
		delete(m.data, e.Key)
	default:
		return fmt.Errorf("unexpected event %+v", e)
	}
	if e.Key == sentinel {
		return errStop
	}
	return nil
}

// write applies one writer's ops to s; values are unique per writer and op.
func write(s *memstore.Store[string, int], w int, ops []writeOp) {
	ctx := context.Background()
	for i, op := range ops {
		v := w*1000 + i
		switch op.kind {
		case "put":
			s.Put(op.key, v)
		case "putIf":
			_, rev, _, _ := s.Get(ctx, op.key)
			if rev == 0 {
				_, _ = s.Create(ctx, op.key, v) // a conflict is a valid outcome
			} else {
				_, _ = s.Update(ctx, op.key, v, rev)
			}
		case "delete":
			_, _ = s.Delete(ctx, op.key, 0)
		case "deleteIf":
			_, rev, _, _ := s.Get(ctx, op.key)
			_, _ = s.Delete(ctx, op.key, max(rev, 1)) // absent: a conflict at revision 1
		case "compact":
			s.Compact(s.Revision() - informer.Revision(i%4))
		}
	}
}

// Concurrent writers, and a mirror that follows the store the way an
// informer does, through compactions and a history small enough to expire
// under it: the mirror must end equal to the store.
func TestAMirrorFromListAndWatchShouldConvergeToTheStoreUnderConcurrentWriters(t *testing.T) {
	var relists atomic.Int64
	rapid.Check(t, func(t *rapid.T) {
		history := rapid.IntRange(1, 64).Draw(t, "history")
		writers := rapid.SliceOfN(genWriter, 1, 4).Draw(t, "writers")
		s := must.Do(memstore.New[string, int](memstore.WithHistory(history)))

		m := &mirror{s: s}
		mirrored := make(chan error, 1)
		go func() { mirrored <- m.run() }()

		var wg sync.WaitGroup
		for w, ops := range writers {
			wg.Go(func() { write(s, w, ops) })
		}
		wg.Wait()
		s.Put(sentinel, 0)

		if err := <-mirrored; err != nil {
			t.Fatal(err)
		}
		want, rev := listMap(t, s)
		if !maps.Equal(want, m.data) || rev != m.rev {
			t.Fatalf("mirror at revision %d: %v; store at revision %d: %v", m.rev, m.data, rev, want)
		}
		relists.Add(int64(m.relists))
	})
	t.Logf("the mirror relisted %d times", relists.Load())
	assert.Positive(t, relists.Load(), "the history was never small enough to make the mirror relist")
}
