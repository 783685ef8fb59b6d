package poll_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
	"github.com/converge-go/converge/internal/must"
)

// newEntriesSource returns a NewEntries source over a new backend on a
// fake clock, whose list function reports an object with a negative
// Version as a record it cannot read, with an error that names the
// version.
func newEntriesSource(t *testing.T) (*poll.Source[string, object], *backend, *clocktesting.FakeClock) {
	t.Helper()
	b := newBackend()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	list := func(ctx context.Context) ([]informer.Entry[string, object], error) {
		objects, err := b.list(ctx)
		if err != nil {
			return nil, err
		}
		entries := make([]informer.Entry[string, object], len(objects))
		for i, o := range objects {
			entries[i] = informer.Entry[string, object]{Key: o.Name, Value: o, Revision: 99}
			if o.Version < 0 {
				entries[i].Err = fmt.Errorf("version %d does not parse", o.Version)
			}
		}
		return entries, nil
	}
	return must.Do(poll.NewEntries(list, poll.WithClock(clk), poll.WithInterval(interval), poll.WithJitter(0))), b, clk
}

func TestABadRecordShouldBeAPutWithErrNeverADelete(t *testing.T) {
	s, b, clk := newEntriesSource(t)
	a1, c1 := object{Name: "a", Version: 1}, object{Name: "c", Version: 1}
	aBad, aBad2, cBad := object{Name: "a", Version: -1}, object{Name: "a", Version: -2}, object{Name: "c", Version: -1}
	b.set(a1, cBad)
	entries, rev := list(t, s, b)
	assert.Equal(t, informer.Revision(2), rev)
	assert.Len(t, entries, 2)
	assert.Equal(t, informer.Entry[string, object]{Key: "a", Value: a1}, entries[0], "the Source's own revisions: none per entry")
	assert.Equal(t, "c", entries[1].Key)
	assert.EqualError(t, entries[1].Err, "version -1 does not parse")
	assert.Zero(t, entries[1].Value, "a bad entry has no value")
	w := watch(t, s, rev)

	b.set(aBad, cBad)
	got := pollOnce(t, w, b, clk)
	if assert.Len(t, got, 2) {
		assert.Equal(t, event{Type: informer.Put, Key: "a", Revision: 3, Err: got[0].Err}, got[0], "a turned bad: a Put with Err, no Delete")
		assert.EqualError(t, got[0].Err, "version -1 does not parse")
		assert.Equal(t, bookmark(3), got[1])
	}
	assert.Empty(t, pollOnce(t, w, b, clk), "still bad, the same error: nothing")

	b.set(aBad2, cBad)
	got = pollOnce(t, w, b, clk)
	if assert.Len(t, got, 2, "a bad value that changed") {
		assert.Equal(t, informer.Revision(4), got[0].Revision)
		assert.EqualError(t, got[0].Err, "version -2 does not parse")
	}

	b.set(a1, cBad)
	assert.Equal(t, []event{{Type: informer.Put, Key: "a", Value: a1, Revision: 5}, bookmark(5)},
		pollOnce(t, w, b, clk), "good again, even with the value it had before: a Put")

	b.set(a1)
	assert.Equal(t, []event{{Type: informer.Delete, Key: "c", Revision: 6}, bookmark(6)},
		pollOnce(t, w, b, clk), "a bad key that vanished: a Delete without a value")
	b.set(a1, c1)
	assert.Equal(t, []event{{Type: informer.Put, Key: "c", Value: c1, Revision: 7}, bookmark(7)}, pollOnce(t, w, b, clk))
}
