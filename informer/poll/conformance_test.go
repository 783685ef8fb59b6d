package poll_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// entry is what the conformance suite's list function returns: a poll
// Source keys each listed object by a function of the object, so the
// object carries its key.
type entry struct {
	Key   string
	Value int
}

// TestSourceConformance runs the Source conformance suite on a poll Source
// over a mutex-guarded map. The clock is real and the interval 2 ms: the
// suite's writers and watches run concurrently, which a fake clock's steps
// would have to be interleaved with by hand.
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Suite[string, int]{
		New: func(*testing.T) sourcetest.Backend[string, int] {
			var (
				mu   sync.Mutex
				data = map[string]int{}
			)
			src := must.Do(poll.New(func(context.Context) ([]entry, error) {
				mu.Lock()
				defer mu.Unlock()
				out := make([]entry, 0, len(data))
				for k, v := range data {
					out = append(out, entry{k, v})
				}
				return out, nil
			}, func(e entry) string { return e.Key },
				poll.WithInterval(2*time.Millisecond), poll.WithJitter(0)))
			return sourcetest.Backend[string, int]{
				Source: values{src},
				Put: func(_ context.Context, k string, v int) error {
					mu.Lock()
					defer mu.Unlock()
					data[k] = v
					return nil
				},
				Delete: func(_ context.Context, k string) error {
					mu.Lock()
					defer mu.Unlock()
					delete(data, k)
					return nil
				},
				// A poll Source resumes only from its latest list: a List
				// expires every revision before it.
				Expire: func(ctx context.Context) error {
					_, _, err := src.List(ctx)
					return err
				},
				DeletesCarryValue: true,
				ResumeLatestOnly:  true,
				Coalesces:         true,
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) int { return i + 1 }, // never 0: see memory's
	})
}

// values is the poll Source with each entry's Value as the value: the
// suite writes any value under any key, so its values cannot carry their
// keys. It only maps values; revisions, errors and order are poll's.
type values struct{ src *poll.Source[string, entry] }

func (v values) List(ctx context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	entries, rev, err := v.src.List(ctx)
	out := make([]informer.Entry[string, int], len(entries))
	for i, e := range entries {
		out[i] = informer.Entry[string, int]{Key: e.Key, Value: e.Value.Value}
	}
	return out, rev, err
}

func (v values) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	return v.src.Watch(ctx, after, func(e informer.Event[string, entry]) error {
		return emit(informer.Event[string, int]{Type: e.Type, Key: e.Key, Value: e.Value.Value, Revision: e.Revision})
	})
}

// errBadRecord is what the list function of
// TestEntriesSourceConformance reports for a record it cannot read.
var errBadRecord = errors.New("record does not parse")

// TestEntriesSourceConformance runs the suite on a NewEntries Source whose
// list function reports a bad record as an entry with Err, so that the
// suite's undecodable-value case runs on poll too.
func TestEntriesSourceConformance(t *testing.T) {
	type record struct {
		value int
		bad   bool
	}
	sourcetest.Run(t, sourcetest.Suite[string, int]{
		New: func(*testing.T) sourcetest.Backend[string, int] {
			var (
				mu   sync.Mutex
				data = map[string]record{}
			)
			src := must.Do(poll.NewEntries(func(context.Context) ([]informer.Entry[string, int], error) {
				mu.Lock()
				defer mu.Unlock()
				out := make([]informer.Entry[string, int], 0, len(data))
				for k, r := range data {
					if r.bad {
						out = append(out, informer.Entry[string, int]{Key: k, Err: errBadRecord})
						continue
					}
					out = append(out, informer.Entry[string, int]{Key: k, Value: r.value})
				}
				return out, nil
			}, poll.WithInterval(2*time.Millisecond), poll.WithJitter(0)))
			set := func(k string, r record) {
				mu.Lock()
				defer mu.Unlock()
				data[k] = r
			}
			return sourcetest.Backend[string, int]{
				Source: src,
				Put:    func(_ context.Context, k string, v int) error { set(k, record{value: v}); return nil },
				Delete: func(_ context.Context, k string) error {
					mu.Lock()
					defer mu.Unlock()
					delete(data, k)
					return nil
				},
				Expire: func(ctx context.Context) error {
					_, _, err := src.List(ctx)
					return err
				},
				PutUndecodable:    func(_ context.Context, k string) error { set(k, record{bad: true}); return nil },
				DeletesCarryValue: true,
				ResumeLatestOnly:  true,
				Coalesces:         true,
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) int { return i + 1 },
	})
}
