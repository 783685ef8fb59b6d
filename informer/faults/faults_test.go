package faults_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// filled returns a memory store with n puts, at revisions 1..n.
func filled(n int) *memstore.Store[int, int] {
	s := must.Do(memstore.New[int, int]())
	for i := range n {
		s.Put(i, i)
	}
	return s
}

// collect watches src after 0 until it fails or n events arrived (then
// it returns nil), and returns the events.
func collect(t *testing.T, src informer.Source[int, int], n int) ([]informer.Event[int, int], error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []informer.Event[int, int]
	done := errors.New("done")
	err := src.Watch(ctx, 0, func(ev informer.Event[int, int]) error {
		got = append(got, ev)
		if len(got) == n {
			return done
		}
		return nil
	})
	if errors.Is(err, done) {
		err = nil
	}
	return got, err
}

func TestHealthySourcePassesEverythingThrough(t *testing.T) {
	src := must.Do(faults.New(filled(50), 1, faults.WithRates(faults.Rates{
		ListError: 1, WatchError: 1, Expire: 1, Duplicate: 1, Delay: 1, MaxDelay: time.Hour,
	})))
	src.Heal()
	entries, rev, err := src.List(context.Background())
	require.NoError(t, err)
	assert.Len(t, entries, 50)
	assert.Equal(t, informer.Revision(50), rev)
	got, err := collect(t, src, 50)
	require.NoError(t, err)
	assert.Len(t, got, 50)
	assert.Equal(t, faults.Counts{}, src.Counts())
}

func TestBreakShouldTurnTheFaultsOnAgainAfterHeal(t *testing.T) {
	src := must.Do(faults.New(filled(1), 1, faults.WithRates(faults.Rates{ListError: 1})))
	src.Heal()
	_, _, err := src.List(context.Background())
	require.NoError(t, err)
	src.Break()
	_, _, err = src.List(context.Background())
	assert.ErrorIs(t, err, faults.ErrInjected)
}

func TestListsFailWithErrInjected(t *testing.T) {
	src := must.Do(faults.New(filled(1), 1, faults.WithRates(faults.Rates{ListError: 1})))
	_, _, err := src.List(context.Background())
	require.ErrorIs(t, err, faults.ErrInjected)
	assert.Equal(t, uint64(1), src.Counts().ListErrors)
}

func TestExpiryIsErrRevisionExpired(t *testing.T) {
	src := must.Do(faults.New(filled(1), 1, faults.WithRates(faults.Rates{Expire: 1})))
	_, err := collect(t, src, 1)
	require.ErrorIs(t, err, informer.ErrRevisionExpired)
	assert.NotErrorIs(t, err, faults.ErrInjected)
}

// Whatever the faults, a watch's events are the store's, in revision
// order, each at most twice in a row: nothing invented or reordered.
func TestWatchFaultsStayWithinTheSourceContract(t *testing.T) {
	for seed := range uint64(20) {
		src := must.Do(faults.New(filled(200), seed, faults.WithRates(faults.Rates{
			WatchError: 0.02, Expire: 0.01, Duplicate: 0.2, Delay: 0.05, MaxDelay: 100 * time.Microsecond,
		})))
		got, err := collect(t, src, 1000)
		require.Error(t, err, "seed %d", seed)
		var last informer.Revision
		for i, ev := range got {
			assert.Equal(t, informer.Put, ev.Type)
			assert.Equal(t, int(ev.Revision)-1, ev.Key, "seed %d: event %d is not the store's", seed, i)
			if ev.Revision == last {
				assert.False(t, i >= 2 && got[i-2].Revision == ev.Revision, "seed %d: sent three times", seed)
			} else {
				assert.Equal(t, last+1, ev.Revision, "seed %d: skipped or reordered", seed)
			}
			last = ev.Revision
		}
	}
}

func TestSameSeedMakesTheSameDecisions(t *testing.T) {
	run := func(seed uint64) ([]informer.Event[int, int], faults.Counts) {
		src := must.Do(faults.New(filled(300), seed, faults.WithRates(faults.Rates{Duplicate: 0.3, WatchError: 0.01})))
		got, _ := collect(t, src, 1000)
		return got, src.Counts()
	}
	a, ca := run(7)
	b, cb := run(7)
	assert.Equal(t, a, b)
	assert.Equal(t, ca, cb)
	c, _ := run(8)
	assert.NotEqual(t, a, c)
}

func TestNewShouldReturnAnErrorForBadRatesOrANilSource(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	for want, r := range map[string]faults.Rates{
		"faults.New: WithRates: ListError -0.1: want a probability in [0, 1]": {ListError: -0.1},
		"faults.New: WithRates: Coalesce 2: want a probability in [0, 1]":     {Coalesce: 2},
		"faults.New: WithRates: MaxDelay -1s, CoalesceWindow 0s":              {MaxDelay: -time.Second},
	} {
		f, err := faults.New[string, int](store, 1, faults.WithRates(r))
		assert.ErrorContains(t, err, want)
		assert.Nil(t, f)
	}
	_, err := faults.New[string, int](nil, 1)
	assert.EqualError(t, err, "faults.New: nil Source")
	_, err = faults.New[string, int](store, 1, nil)
	assert.EqualError(t, err, "faults.New: option 0 is nil")
}
