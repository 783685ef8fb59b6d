package memstore

import "fmt"

// DefaultHistory is the number of changes a store keeps for Watch to resume
// from, unless WithHistory says otherwise.
const DefaultHistory = 100_000

// Option configures a Store in New.
type Option func(*options)

type options struct {
	history int
}

// WithHistory sets how many changes (revisions) of history the store keeps:
// a Watch can resume after any of the last n revisions, and one that starts
// or falls further behind returns informer.ErrRevisionExpired. It is a
// rolling compaction at Revision()-n; see Store.Compact.
//
// A larger history lets a watcher survive longer disconnects or slower
// handlers without a relist, at the cost of keeping n old keys and values
// alive. n must be at least 1, or New panics. Default: DefaultHistory.
func WithHistory(n int) Option {
	return func(o *options) { o.history = n }
}

func newOptions(opts []Option) options {
	o := options{history: DefaultHistory}
	for _, opt := range opts {
		opt(&o)
	}
	if o.history < 1 {
		panic(fmt.Sprintf("memory: WithHistory(%d): the history must hold at least one change", o.history))
	}
	return o
}
