package faults_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// A window opened by the first event holds everything that comes in it,
// then lets out each key's latest event in revision order; the next event
// after it opens the next window. Virtual time makes the window exact.
func TestCoalescingShouldEmitOnlyEachKeysLatestEventOfAWindowInRevisionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := must.Do(memstore.New[string, int]())
		src := must.Do(faults.New(store, 1, faults.WithRates(faults.Rates{Coalesce: 1, CoalesceWindow: time.Second})))
		store.Put("a", 1) // 1
		store.Put("a", 2) // 2
		store.Put("b", 1) // 3
		store.Put("a", 3) // 4

		got := make(chan informer.Event[string, int], 16)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- src.Watch(ctx, 0, func(ev informer.Event[string, int]) error { got <- ev; return nil })
		}()
		synctest.Wait()
		assert.Empty(t, got, "nothing leaves an open window")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"b@3=1", "a@4=3"}, drain(got))

		store.Put("c", 1) // 5: opens the next window
		_, err := store.Delete(ctx, "c", 0)
		require.NoError(t, err) // 6
		store.Put("c", 2)       // 7
		synctest.Wait()
		assert.Empty(t, got)
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"c@7=2"}, drain(got), "put, delete, put: the put that lasts")
		assert.Equal(t, uint64(4), src.Counts().Coalesced)

		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

// A healthy source opens no window: events pass at once.
func TestAHealthySourceShouldNotCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := must.Do(memstore.New[string, int]())
		src := must.Do(faults.New(store, 1, faults.WithRates(faults.Rates{Coalesce: 1, CoalesceWindow: time.Hour})))
		src.Heal()
		store.Put("a", 1)
		store.Put("a", 2)
		got, err := collectStr(t, src, 2)
		require.NoError(t, err)
		assert.Equal(t, []string{"a@1=1", "a@2=2"}, got)
	})
}

// Coalescing is a subsequence of each key's changes ending with its last:
// the Source conformance suite with Coalesces, in real time with windows
// of a millisecond, every second event opening one.
func TestCoalescingShouldStayWithinTheSourceContract(t *testing.T) {
	seed := uint64(0)
	sourcetest.Run(t, sourcetest.Suite[string, int]{
		New: func(*testing.T) sourcetest.Backend[string, int] {
			s := must.Do(memstore.New[string, int]())
			seed++
			return sourcetest.Backend[string, int]{
				Source: must.Do(faults.New(s, seed, faults.WithRates(faults.Rates{Coalesce: 0.5, CoalesceWindow: time.Millisecond}))),
				Put:    func(_ context.Context, k string, v int) error { s.Put(k, v); return nil },
				Delete: func(ctx context.Context, k string) error { _, err := s.Delete(ctx, k, 0); return err },
				Expire: func(context.Context) error { s.Compact(s.Revision()); return nil },
				// Coalesced deletes still carry the value.
				DeletesCarryValue: true,
				Coalesces:         true,
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) int { return i + 1 },
	})
}

// drain returns what is in got now, as "key@rev=value".
func drain(got chan informer.Event[string, int]) []string {
	var s []string
	for {
		select {
		case ev := <-got:
			s = append(s, ev.Key+"@"+strconv.Itoa(int(ev.Revision))+"="+strconv.Itoa(ev.Value))
		default:
			return s
		}
	}
}

// collectStr watches src after 0 until n events arrived, as drain prints them.
func collectStr(t *testing.T, src informer.Source[string, int], n int) ([]string, error) {
	got := make(chan informer.Event[string, int], n)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := src.Watch(ctx, 0, func(ev informer.Event[string, int]) error {
		got <- ev
		if len(got) == n {
			cancel()
		}
		return nil
	})
	if ctx.Err() != nil && len(got) == n {
		err = nil
	}
	return drain(got), err
}
