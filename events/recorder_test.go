package events_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/internal/must"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newRecorder returns a recorder on a fake clock at t0 with a memory sink.
func newRecorder(opts ...events.Option) (*events.Recorder, *events.MemorySink, *clocktesting.FakePassiveClock) {
	clk := clocktesting.NewFakePassiveClock(t0)
	mem := must.Do(events.NewMemorySink(0))
	return must.Do(events.NewRecorder("test-controller", append([]events.Option{events.WithClock(clk), events.WithSink(mem)}, opts...)...)), mem, clk
}

// repeat records one event n times, step apart on the fake clock, and
// returns the one event the sink holds for its key.
func repeat(t *testing.T, n int, step time.Duration, reason, message string) (events.Event, *events.Recorder) {
	t.Helper()
	rec, mem, clk := newRecorder()
	for range n {
		rec.Event(context.Background(), "web", events.Warning, reason, message)
		clk.SetTime(clk.Now().Add(step))
	}
	got := mem.Events("web")
	require.Len(t, got, 1)
	return got[0], rec
}

func TestARepeatedEventIsCountedNotDuplicated(t *testing.T) {
	e, rec := repeat(t, 3, time.Second, "FailedCreate", "exceeded quota")
	assert.Equal(t, 3, e.Count)
	assert.Equal(t, t0, e.First)
	assert.Equal(t, t0.Add(2*time.Second), e.Last)
	assert.Equal(t, "test-controller", e.Source)
	assert.Equal(t, events.EventID("test-controller", "web", events.Warning, "FailedCreate", "exceeded quota"), e.ID)
	assert.Equal(t, events.Stats{Recorded: 1, Merged: 2}, rec.Stats())
}

func TestEventsDifferingInTypeReasonOrMessageAreSeparate(t *testing.T) {
	rec, mem, _ := newRecorder()
	ctx := context.Background()
	rec.Event(ctx, "web", events.Normal, "SuccessfulCreate", "Created pod: web-1")
	rec.Event(ctx, "web", events.Warning, "SuccessfulCreate", "Created pod: web-1")
	rec.Event(ctx, "web", events.Normal, "SuccessfulDelete", "Created pod: web-1")
	rec.Event(ctx, "web", events.Normal, "SuccessfulCreate", "Created pod: web-2")
	rec.Event(ctx, "db", events.Normal, "SuccessfulCreate", "Created pod: web-1")
	assert.Len(t, mem.Events("web"), 4)
	assert.Len(t, mem.Events("db"), 1)
	assert.Equal(t, uint64(5), rec.Stats().Recorded)
}

// The bound the package promises: in a hot loop with a new message every
// millisecond for 100 s, a key gets the burst, then one event per refill;
// and in any minute at most burst + 6.
func TestAHotLoopOfNewMessagesGetsTheBurstThenOneEventPerRefill(t *testing.T) {
	rec, mem, clk := newRecorder()
	ctx := context.Background()
	var perMinute [2]int
	for i := range 100_000 {
		before := rec.Stats().Recorded
		rec.Eventf(ctx, "web", events.Warning, "FailedCreate", "attempt %d failed", i)
		if rec.Stats().Recorded > before {
			perMinute[clk.Now().Sub(t0)/time.Minute]++
		}
		clk.SetTime(clk.Now().Add(time.Millisecond))
	}
	st := rec.Stats()
	// 25 at once, then one per 10 s: the 10th refill is due at 100 s, just
	// after the loop's last call at 99.999 s.
	assert.Equal(t, uint64(events.DefaultBurst+9), st.Recorded)
	assert.Equal(t, uint64(100_000)-st.Recorded, st.RateLimited)
	assert.LessOrEqual(t, perMinute[0], events.DefaultBurst+6)
	assert.LessOrEqual(t, perMinute[1], 6)
	assert.Len(t, mem.Events("web"), events.MaxEventsPerKey, "the sink keeps only the newest")
}

func TestAHotLoopOfOneMessageIsOneEventWithTheWholeCount(t *testing.T) {
	e, rec := repeat(t, 100_000, time.Millisecond, "BackOff", "Back-off restarting failed process")
	assert.Equal(t, 100_000, e.Count)
	assert.Equal(t, events.Stats{Recorded: 1, Merged: 99_999}, rec.Stats())
}

func TestARepeatIsCountedEvenWhenTheKeyHasNoTokenLeft(t *testing.T) {
	rec, mem, _ := newRecorder(events.WithRateLimit(2, time.Hour))
	ctx := context.Background()
	rec.Event(ctx, "web", events.Normal, "A", "a")
	rec.Event(ctx, "web", events.Normal, "B", "b")
	rec.Event(ctx, "web", events.Normal, "C", "c") // no token
	rec.Event(ctx, "web", events.Normal, "A", "a") // a repeat: counted
	got := mem.Events("web")
	require.Len(t, got, 2)
	assert.Equal(t, "A", got[0].Reason, "the repeat is now the newest")
	assert.Equal(t, 2, got[0].Count)
	assert.Equal(t, uint64(1), rec.Stats().RateLimited)
}

func TestTheRateLimitIsPerKey(t *testing.T) {
	rec, mem, _ := newRecorder(events.WithRateLimit(1, time.Hour))
	ctx := context.Background()
	rec.Event(ctx, "a", events.Normal, "R", "1")
	rec.Event(ctx, "a", events.Normal, "R", "2")
	rec.Event(ctx, "b", events.Normal, "R", "1")
	assert.Len(t, mem.Events("a"), 1)
	assert.Len(t, mem.Events("b"), 1, "a's empty bucket does not limit b")
}

func TestAnEventOfAnUnknownTypeOrWithoutReasonIsDroppedAndCounted(t *testing.T) {
	rec, mem, _ := newRecorder()
	ctx := context.Background()
	rec.Event(ctx, "web", events.Type("Error"), "R", "m")
	rec.Event(ctx, "web", events.Normal, "", "m")
	assert.Empty(t, mem.Keys())
	assert.Equal(t, events.Stats{Invalid: 2}, rec.Stats())
}

func TestALongMessageIsTruncatedOnARuneBoundary(t *testing.T) {
	rec, mem, _ := newRecorder(events.WithMaxMessageBytes(16))
	rec.Event(context.Background(), "web", events.Warning, "R", strings.Repeat("é", 20)) // 2 bytes each
	got := mem.Events("web")[0].Message
	assert.LessOrEqual(t, len(got), 16)
	assert.True(t, utf8.ValidString(got), "%q", got)
	assert.True(t, strings.HasSuffix(got, "…"), "%q", got)
}

func TestTheLeastRecentlyUsedKeyIsForgottenBeyondMaxKeys(t *testing.T) {
	rec, _, _ := newRecorder(events.WithMaxKeys(2), events.WithRateLimit(1, time.Hour))
	ctx := context.Background()
	rec.Event(ctx, "a", events.Normal, "R", "m")
	rec.Event(ctx, "a", events.Normal, "R", "n") // a's bucket is empty
	rec.Event(ctx, "b", events.Normal, "R", "m")
	rec.Event(ctx, "c", events.Normal, "R", "m") // forgets a, and its bucket
	rec.Event(ctx, "a", events.Normal, "R", "m") // new again, with a full bucket
	assert.Equal(t, events.Stats{Recorded: 4, RateLimited: 1}, rec.Stats())
}

func TestTheLeastRecentlyRecordedEventOfAKeyIsForgottenBeyondMaxEventsPerKey(t *testing.T) {
	rec, _, _ := newRecorder(events.WithRateLimit(100, time.Hour))
	ctx := context.Background()
	for i := range events.MaxEventsPerKey + 1 {
		rec.Event(ctx, "web", events.Normal, "R", strconv.Itoa(i))
	}
	rec.Event(ctx, "web", events.Normal, "R", "0") // forgotten: new again
	rec.Event(ctx, "web", events.Normal, "R", "2") // still held: counted
	assert.Equal(t, events.Stats{Recorded: uint64(events.MaxEventsPerKey) + 2, Merged: 1}, rec.Stats())
}

func TestANilRecorderRecordsNothing(t *testing.T) {
	var rec *events.Recorder
	rec.Event(context.Background(), "web", events.Normal, "R", "m")
	rec.Eventf(context.Background(), "web", events.Normal, "R", "%d", 1)
	assert.Equal(t, events.Stats{}, rec.Stats())
}

type idKey struct{}

func TestTheReconcileIDComesFromTheContext(t *testing.T) {
	id := func(ctx context.Context) string { s, _ := ctx.Value(idKey{}).(string); return s }
	rec, mem, _ := newRecorder(events.WithContextID(id))
	rec.Event(context.WithValue(context.Background(), idKey{}, "41"), "web", events.Normal, "R", "m")
	rec.Event(context.WithValue(context.Background(), idKey{}, "42"), "web", events.Normal, "R", "m")
	assert.Equal(t, "42", mem.Events("web")[0].ReconcileID, "the last reconcile that recorded it")
}

func TestAnEventIsRecordedUnderADoneContext(t *testing.T) {
	rec, mem, _ := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec.Event(ctx, "web", events.Warning, "Cancelled", "reconcile cancelled")
	assert.Len(t, mem.Events("web"), 1)
}

func TestConcurrentRepeatsAreCountedExactly(t *testing.T) {
	rec, mem, _ := newRecorder()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				rec.Event(context.Background(), "web", events.Warning, "BackOff", "m")
			}
		})
	}
	wg.Wait()
	require.Len(t, mem.Events("web"), 1)
	assert.Equal(t, 8000, mem.Events("web")[0].Count, "the sink kept the newest version")
}

func TestEventIDSeparatesFieldsAndIsStable(t *testing.T) {
	a := events.EventID("s", "ab", events.Normal, "R", "c")
	assert.Equal(t, a, events.EventID("s", "ab", events.Normal, "R", "c"))
	assert.NotEqual(t, a, events.EventID("s", "a", events.Normal, "R", "bc"))
	assert.Len(t, a, 16)
	assert.Equal(t, "e4bc4fd9252be94f", events.EventID("", "", "", "", ""), "FNV-1a of five NUL bytes, computed independently: stored IDs depend on it")
}

func TestBadOptionsShouldBeAnErrorNamingTheConstructorAndTheOption(t *testing.T) {
	for want, f := range map[string]func() (any, error){
		"events.NewRecorder: empty source":           func() (any, error) { return events.NewRecorder("") },
		"events.NewRecorder(\"s\"): WithSink(nil)":   func() (any, error) { return events.NewRecorder("s", events.WithSink(nil)) },
		"events.NewRecorder(\"s\"): WithClock(nil)":  func() (any, error) { return events.NewRecorder("s", events.WithClock(nil)) },
		"WithRateLimit(0, 1s): want burst >= 1":      func() (any, error) { return events.NewRecorder("s", events.WithRateLimit(0, time.Second)) },
		"WithRateLimit(1, 0s)":                       func() (any, error) { return events.NewRecorder("s", events.WithRateLimit(1, 0)) },
		"WithMaxKeys(0): want >= 1":                  func() (any, error) { return events.NewRecorder("s", events.WithMaxKeys(0)) },
		"WithMaxMessageBytes(15): want >= 16":        func() (any, error) { return events.NewRecorder("s", events.WithMaxMessageBytes(15)) },
		"WithContextID(nil)":                         func() (any, error) { return events.NewRecorder("s", events.WithContextID(nil)) },
		"events.NewRecorder(\"s\"): option 0 is nil": func() (any, error) { return events.NewRecorder("s", nil) },
		"events.NewMemorySink(-1): want >= 0":        func() (any, error) { return events.NewMemorySink(-1) },
	} {
		v, err := f()
		assert.ErrorContains(t, err, want)
		assert.Nil(t, v, want)
	}
}

func TestARepeatMakesAnEventTheMostRecentlyRecordedSoItIsForgottenLast(t *testing.T) {
	rec, _, _ := newRecorder(events.WithRateLimit(100, time.Hour))
	ctx := context.Background()
	for i := range events.MaxEventsPerKey {
		rec.Event(ctx, "web", events.Normal, "R", strconv.Itoa(i))
	}
	rec.Event(ctx, "web", events.Normal, "R", "0")   // a repeat: now the most recent
	rec.Event(ctx, "web", events.Normal, "R", "new") // forgets 1, the least recent
	rec.Event(ctx, "web", events.Normal, "R", "0")   // still held
	rec.Event(ctx, "web", events.Normal, "R", "1")   // forgotten: new again
	assert.Equal(t, events.Stats{Recorded: uint64(events.MaxEventsPerKey) + 2, Merged: 2}, rec.Stats())
}
