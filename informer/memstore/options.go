package memstore

import "fmt"

// DefaultHistory is the number of changes a store keeps for Watch to resume
// from, unless WithHistory says otherwise.
const DefaultHistory = 100_000

// Option configures a Store in New.
type Option func(*options)

type options struct {
	history      int
	conflictRate float64
	conflictSeed uint64
}

// WithHistory sets how many changes (revisions) of history the store keeps:
// a Watch can resume after any of the last n revisions, and one that starts
// or falls further behind returns informer.ErrRevisionExpired. It is a
// rolling compaction at Revision()-n; see Store.Compact.
//
// A larger history lets a watcher survive longer disconnects or slower
// handlers without a relist, at the cost of keeping n old keys and values
// alive. n must be at least 1, or New returns an error. Default: DefaultHistory.
func WithHistory(n int) Option {
	return func(o *options) { o.history = n }
}

// WithConflicts is for tests: it makes each compare-and-swap write (Create,
// Update, and Delete at a revision above 0) fail with probability rate
// with an error wrapping informer.ErrConflict, writing nothing, as if
// another writer had changed the key between the caller's read and its
// write. (Unlike such a writer it moves neither the key nor the revision,
// and a Create can conflict although the key is absent.) An ordinary
// workload on the memory store never conflicts, so a controller's conflict
// path (informer.Update's retries, a reconcile's requeue) goes untested
// without it.
//
// The draws come from a PCG generator seeded with seed, one per
// compare-and-swap write in the order the store serves them: the same
// writes in the same order conflict the same way in every run. Put and a
// Delete at revision 0 are blind and never conflict. Store.InjectedConflicts
// counts the conflicts made. rate must be in [0, 1], or New returns an
// error; 1 fails
// every conditional write. Default: rate 0, no conflict is ever injected.
func WithConflicts(rate float64, seed uint64) Option {
	return func(o *options) { o.conflictRate, o.conflictSeed = rate, seed }
}

func newOptions(opts []Option) (options, error) {
	o := options{history: DefaultHistory}
	for i, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("memstore.New: option %d is nil", i)
		}
		opt(&o)
	}
	if o.history < 1 {
		return o, fmt.Errorf("memstore.New: WithHistory(%d): the history must hold at least one change", o.history)
	}
	if !(o.conflictRate >= 0 && o.conflictRate <= 1) { // also rejects NaN
		return o, fmt.Errorf("memstore.New: WithConflicts(%v, %d): the rate must be in [0, 1]", o.conflictRate, o.conflictSeed)
	}
	return o, nil
}
