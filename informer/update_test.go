package informer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

// widget is a value with metadata, a slice and a status, as users write
// them.
type widget struct {
	object.Meta
	Size   int
	Labels []string
	Status string
}

// hookedStore is a memstore whose writes can be intercepted: before runs
// before every write (to write behind the caller's back, making its write
// conflict), conflict makes writes fail with ErrConflict without writing,
// getErr makes Get fail. It counts Gets.
type hookedStore[V any] struct {
	*memstore.Store[string, V]
	gets     atomic.Int64
	before   func(op string)
	conflict bool
	getErr   error
	yield    bool // runtime.Gosched after every Get, to interleave writers
}

func newHooked[V any]() *hookedStore[V] {
	return &hookedStore[V]{Store: must.Do(memstore.New[string, V]())}
}

var errStoreConflict = fmt.Errorf("hooked: %w", informer.ErrConflict)

func (h *hookedStore[V]) Get(ctx context.Context, key string) (V, informer.Revision, bool, error) {
	h.gets.Add(1)
	if h.getErr != nil {
		var zero V
		return zero, 0, false, h.getErr
	}
	v, rev, ok, err := h.Store.Get(ctx, key)
	if h.yield {
		runtime.Gosched()
	}
	return v, rev, ok, err
}

func (h *hookedStore[V]) write(op string) error {
	if h.before != nil {
		h.before(op)
	}
	if h.conflict {
		return errStoreConflict
	}
	return nil
}

func (h *hookedStore[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	if err := h.write("create"); err != nil {
		return 0, err
	}
	return h.Store.Create(ctx, key, v)
}

func (h *hookedStore[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := h.write("update"); err != nil {
		return 0, err
	}
	return h.Store.Update(ctx, key, v, rev)
}

func (h *hookedStore[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	if err := h.write("delete"); err != nil {
		return 0, err
	}
	return h.Store.Delete(ctx, key, rev)
}

// fixedBackoff waits exactly d between attempts, so that tests can check
// the virtual time spent.
func fixedBackoff(d time.Duration) backoff.Exponential {
	return backoff.Exponential{Base: d, Cap: d, Factor: 1}
}

func TestUpdateShouldWriteAMutatedCopyAtTheRevisionRead(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	r0 := s.Put("w", widget{Size: 1, Labels: []string{"a"}})
	shared, _, _, _ := s.Get(t.Context(), "w")

	rev, op, err := informer.Update(t.Context(), s, "w", func(w *widget) error {
		w.Size = 2
		w.Labels = append(w.Labels[:len(w.Labels):len(w.Labels)], "b")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
	assert.Greater(t, rev, r0)
	got, gotRev, _, _ := s.Get(t.Context(), "w")
	assert.Equal(t, widget{Size: 2, Labels: []string{"a", "b"}}, got)
	assert.Equal(t, rev, gotRev, "the revision returned is the write's")
	assert.Equal(t, widget{Size: 1, Labels: []string{"a"}}, shared, "the value read before")
}

func TestUpdateShouldWriteNothingWhenMutateChangesNothing(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	r0 := s.Put("w", widget{Size: 1, Labels: []string{"a"}})
	rev, op, err := informer.Update(t.Context(), s, "w", func(w *widget) error {
		w.Labels = []string{"a"} // a new slice, equal by DeepEqual
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op)
	assert.Equal(t, r0, rev, "Unchanged returns the revision read")
	assert.Equal(t, r0, s.Revision(), "nothing was written")
}

func TestUpdateShouldReturnMutatesErrorAsIsWithoutRetryingOrWriting(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	r0 := s.Put("w", widget{Size: 1})
	mine := fmt.Errorf("mutate: %w", informer.ErrConflict) // not the store's: no retry
	calls := 0
	_, op, err := informer.Update(t.Context(), s, "w", func(w *widget) error {
		calls++
		w.Size = 5
		return mine
	})
	assert.Same(t, mine, err)
	assert.Equal(t, informer.Unchanged, op)
	assert.Equal(t, 1, calls)
	assert.Equal(t, r0, s.Revision())
}

func TestUpdateShouldReportAnAbsentKeyAsErrNotFound(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	_, _, err := informer.Update(t.Context(), s, "w", func(*widget) error {
		t.Error("mutate called for an absent key")
		return nil
	})
	require.ErrorIs(t, err, informer.ErrNotFound)
	assert.ErrorContains(t, err, "update w", "the error names the key")

	_, _, err = informer.RequestDelete(t.Context(), s, "w")
	require.ErrorIs(t, err, informer.ErrNotFound)
}

func TestUpdateShouldWrapTheStoresOtherErrorsWithoutRetrying(t *testing.T) {
	s := newHooked[widget]()
	s.Put("w", widget{})
	broken := errors.New("store down")
	s.getErr = broken
	_, _, err := informer.Update(t.Context(), s, "w", func(*widget) error { return nil })
	require.ErrorIs(t, err, broken)
	assert.NotErrorIs(t, err, informer.ErrConflict)
	assert.Equal(t, int64(1), s.gets.Load())
}

func TestCreateOrUpdateShouldCreateAnAbsentKeyFromTheZeroValueThenUpdateIt(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	mutate := func(size int) func(*widget) error {
		return func(w *widget) error {
			w.Size = size
			return nil
		}
	}
	rev, op, err := informer.CreateOrUpdate(t.Context(), s, "w", mutate(1))
	require.NoError(t, err)
	assert.Equal(t, informer.Created, op)
	got, gotRev, _, _ := s.Get(t.Context(), "w")
	assert.Equal(t, widget{Size: 1}, got)
	assert.Equal(t, rev, gotRev)

	_, op, err = informer.CreateOrUpdate(t.Context(), s, "w", mutate(2))
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
	_, op, err = informer.CreateOrUpdate(t.Context(), s, "w", mutate(2))
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op)
}

func TestCreateOrUpdateShouldRetryACreateThatConflictsAsAnUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.before = func(op string) {
			if op == "create" {
				s.Put("w", widget{Size: 10}) // someone else created it first
			}
		}
		var seen []int
		_, op, err := informer.CreateOrUpdate(t.Context(), s, "w", func(w *widget) error {
			seen = append(seen, w.Size)
			w.Size++
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op)
		assert.Equal(t, []int{0, 10}, seen, "mutate saw the zero value, then the other writer's")
		got, _, _, _ := s.Get(t.Context(), "w")
		assert.Equal(t, 11, got.Size)
	})
}

func TestCreateOrUpdateShouldNotCreateAValueThatWouldBeDeletedAtOnce(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	rev, op, err := informer.CreateOrUpdate(t.Context(), s, "w", func(w *widget) error {
		w.DeletionRequested = time.Unix(1, 0)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op)
	assert.Zero(t, rev)
	assert.Zero(t, s.Len())
}

func TestUpdateShouldRetryOnConflictAndLoseNoIncrement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.yield = true
		s.Put("w", widget{})
		const writers, increments = 8, 50
		var wg sync.WaitGroup
		var calls atomic.Int64
		for range writers {
			wg.Go(func() {
				for range increments {
					// Enough attempts that 8 writers in a loop never run
					// out: this test is about losing none, not giving up.
					_, op, err := informer.Update(t.Context(), s, "w", func(w *widget) error {
						calls.Add(1)
						w.Size++
						w.Status = fmt.Sprint("size ", w.Size)
						return nil
					}, informer.WithAttempts(1000))
					assert.NoError(t, err)
					assert.Equal(t, informer.Updated, op)
				}
			})
		}
		wg.Wait()
		got, _, _, _ := s.Get(t.Context(), "w")
		assert.Equal(t, writers*increments, got.Size, "fewer: a lost update")
		assert.Equal(t, fmt.Sprint("size ", got.Size), got.Status)
		assert.Greater(t, calls.Load(), int64(writers*increments), "no conflict happened: the retry path was not exercised")
	})
}

func TestUpdateShouldReturnErrConflictAfterTheLastAttemptHavingWaitedBetweenThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.Put("w", widget{})
		s.conflict = true
		calls := 0
		start := time.Now()
		_, op, err := informer.Update(t.Context(), s, "w", func(w *widget) error {
			calls++
			w.Size++
			return nil
		}, informer.WithAttempts(3), informer.WithUpdateBackoff(fixedBackoff(10*time.Millisecond)))
		require.ErrorIs(t, err, informer.ErrConflict)
		assert.ErrorContains(t, err, "3 attempts")
		assert.Equal(t, informer.Unchanged, op)
		assert.Equal(t, 3, calls, "mutate runs once per attempt")
		assert.Equal(t, 20*time.Millisecond, time.Since(start), "two waits of 10ms between three attempts")
	})
}

func TestUpdateShouldRetryByDefaultFiveTimesWithinTheDefaultBackoffsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.Put("w", widget{})
		s.conflict = true
		start := time.Now()
		_, _, err := informer.Update(t.Context(), s, "w", func(w *widget) error { w.Size++; return nil })
		require.ErrorIs(t, err, informer.ErrConflict)
		assert.Equal(t, int64(informer.DefaultUpdateAttempts), s.gets.Load())
		assert.LessOrEqual(t, time.Since(start), 150*time.Millisecond, "10+20+40+80ms at most")
	})
}

func TestWithUpdateBackoffShouldChangeTheWaitAndKeepTheDefaultAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.Put("w", widget{})
		s.conflict = true
		start := time.Now()
		_, _, err := informer.Update(t.Context(), s, "w", func(w *widget) error { w.Size++; return nil },
			informer.WithUpdateBackoff(fixedBackoff(time.Minute)))
		require.ErrorIs(t, err, informer.ErrConflict)
		assert.Equal(t, int64(informer.DefaultUpdateAttempts), s.gets.Load())
		assert.Equal(t, time.Duration(informer.DefaultUpdateAttempts-1)*time.Minute, time.Since(start))
	})
}

func TestUpdateShouldStopWaitingWhenTheContextEndsDuringABackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHooked[widget]()
		s.Put("w", widget{})
		s.conflict = true
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, _, err := informer.Update(ctx, s, "w", func(w *widget) error { w.Size++; return nil },
			informer.WithAttempts(5), informer.WithUpdateBackoff(fixedBackoff(time.Hour)))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "returned when ctx ended, not after the backoff")
		assert.Equal(t, int64(1), s.gets.Load())
	})
}

func TestUpdateShouldWaitOnTheGivenClock(t *testing.T) {
	s := newHooked[widget]()
	s.Put("w", widget{})
	s.conflict = true
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() {
		_, _, err := informer.Update(t.Context(), s, "w", func(w *widget) error { w.Size++; return nil },
			informer.WithAttempts(2), informer.WithUpdateBackoff(fixedBackoff(time.Minute)), informer.WithUpdateClock(clk))
		done <- err
	}()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "the helper waits on the fake clock")
	select {
	case err := <-done:
		t.Fatalf("returned before the fake clock moved: %v", err)
	default:
	}
	clk.Step(time.Minute)
	require.ErrorIs(t, <-done, informer.ErrConflict)
	assert.Equal(t, int64(2), s.gets.Load())
}

// copied has deepcopy-gen's pointer form and a map that its DeepCopy
// copies, so that mutate may change the map in place.
type copied struct {
	Tags map[string]string
}

func (c *copied) DeepCopy() *copied { return &copied{Tags: maps.Clone(c.Tags)} }

// valueCopied has the value form, DeepCopy() V.
type valueCopied struct {
	Tags map[string]string
}

func (c valueCopied) DeepCopy() valueCopied { return valueCopied{Tags: maps.Clone(c.Tags)} }

// Mutating a map in place is safe only on a deep copy: the shallow copy's
// map is the store's.
func TestUpdateShouldMutateTheValuesDeepCopyLeavingTheSharedValueUnchanged(t *testing.T) {
	t.Run("pointer receiver, DeepCopy() *V", func(t *testing.T) {
		s := must.Do(memstore.New[string, copied]())
		s.Put("k", copied{Tags: map[string]string{"a": "1"}})
		shared, _, _, _ := s.Get(t.Context(), "k")
		_, op, err := informer.Update(t.Context(), s, "k", func(c *copied) error { c.Tags["a"] = "2"; return nil })
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op, "the change in place was seen: old and new differ")
		assert.Equal(t, "1", shared.Tags["a"])
	})
	t.Run("value receiver, DeepCopy() V", func(t *testing.T) {
		s := must.Do(memstore.New[string, valueCopied]())
		s.Put("k", valueCopied{Tags: map[string]string{"a": "1"}})
		shared, _, _, _ := s.Get(t.Context(), "k")
		_, op, err := informer.Update(t.Context(), s, "k", func(c *valueCopied) error { c.Tags["a"] = "2"; return nil })
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op)
		assert.Equal(t, "1", shared.Tags["a"])
	})
	t.Run("V a pointer with DeepCopy() V", func(t *testing.T) {
		s := must.Do(memstore.New[string, *copied]())
		s.Put("k", &copied{Tags: map[string]string{"a": "1"}})
		shared, _, _, _ := s.Get(t.Context(), "k")
		_, op, err := informer.Update(t.Context(), s, "k", func(c **copied) error { (*c).Tags["a"] = "2"; return nil })
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op)
		assert.Equal(t, "1", shared.Tags["a"])
	})
	t.Run("V a pointer without DeepCopy: the pointee is copied", func(t *testing.T) {
		s := must.Do(memstore.New[string, *widget]())
		s.Put("k", &widget{Size: 1})
		shared, _, _, _ := s.Get(t.Context(), "k")
		_, op, err := informer.Update(t.Context(), s, "k", func(w **widget) error { (*w).Size = 2; return nil })
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op)
		assert.Equal(t, 1, shared.Size)
		got, _, _, _ := s.Get(t.Context(), "k")
		assert.Equal(t, 2, got.Size)
	})
}

// heartbeat's Equal ignores Beat: a change to Beat alone is not worth a
// write.
type heartbeat struct {
	Spec string
	Beat int
}

func (h heartbeat) Equal(o heartbeat) bool { return h.Spec == o.Spec }

func TestUpdateShouldCompareWithTheValuesEqualMethod(t *testing.T) {
	s := must.Do(memstore.New[string, heartbeat]())
	r0 := s.Put("k", heartbeat{Spec: "a"})
	rev, op, err := informer.Update(t.Context(), s, "k", func(h *heartbeat) error { h.Beat++; return nil })
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op, "Equal says only Beat changed")
	assert.Equal(t, r0, rev)

	_, op, err = informer.Update(t.Context(), s, "k", func(h *heartbeat) error { h.Spec = "b"; return nil })
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
}

func TestUpdateShouldDeleteADeletingKeyWhenItsLastFinalizerIsRemoved(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	s.Put("w", widget{Meta: object.Meta{Finalizers: []string{"a", "b"}, DeletionRequested: time.Unix(1, 0)}})
	remove := func(name string) func(*widget) error {
		return func(w *widget) error { w.RemoveFinalizer(name); return nil }
	}
	_, op, err := informer.Update(t.Context(), s, "w", remove("a"))
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op, "one finalizer left")

	rev, op, err := informer.Update(t.Context(), s, "w", remove("b"))
	require.NoError(t, err)
	assert.Equal(t, informer.Deleted, op)
	assert.Equal(t, s.Revision(), rev, "the delete's revision")
	_, _, ok, _ := s.Get(t.Context(), "w")
	assert.False(t, ok, "deleted")
}

func TestUpdateShouldDeleteADeletingKeyWithoutFinalizersEvenIfMutateChangesNothing(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	s.Put("w", widget{Meta: object.Meta{DeletionRequested: time.Unix(1, 0)}}) // a raw write left it so
	_, op, err := informer.Update(t.Context(), s, "w", func(*widget) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, informer.Deleted, op)
	assert.Zero(t, s.Len())
}

func TestUpdateShouldNotDeleteALiveKeyWithoutFinalizers(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	s.Put("w", widget{Meta: object.Meta{Finalizers: []string{"a"}}})
	_, op, err := informer.Update(t.Context(), s, "w", func(w *widget) error { w.RemoveFinalizer("a"); return nil })
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
	assert.Equal(t, 1, s.Len())
}
