package queue

import "time"

// Stats is a snapshot of a queue's state: see Queue.Stats.
type Stats struct {
	// Ready counts the ready keys by priority.
	Ready map[int]int
	// ReadyByGroup counts the ready keys by fairness group (WithGroup),
	// over all priorities; nil without groups.
	ReadyByGroup map[string]int
	// Len is the number of ready keys, the sum of Ready.
	Len int
	// Waiting counts the keys waiting for a delay (AddAfter, a backoff),
	// parked ones included.
	Waiting int
	// Processing counts the keys handed out by Get and not yet Done.
	Processing int
	// OldestReady is how long the oldest ready key has waited, if
	// OldestKnown. It is exact with ageing on; without it, it is the oldest
	// of the heads of the ready lists, which a key raised to a higher
	// priority can hide.
	OldestReady time.Duration
	// OldestKnown says that OldestReady was measured: some key is ready
	// and its ready time was noted (with WithMetrics, or with ageing while
	// keys of several priorities are ready).
	OldestKnown bool
	// ShuttingDown is true after ShutDown.
	ShuttingDown bool
}

// Stats returns a snapshot of the queue's depth by priority and group, its
// waiting and processing keys and the oldest ready key's wait. It costs
// O(priorities × groups) under the queue's lock, whatever the number of
// keys, and adds no work to Add, Get or Done.
func (q *Queue[K]) Stats() Stats {
	// A conversion, not a copy field by field: it stops compiling if the
	// engine's Stats and this one ever differ.
	return Stats(q.e.Stats())
}
