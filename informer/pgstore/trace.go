package pgstore

import "time"

// tracer is told when the reader's stages happen, so that a benchmark can
// split write → event latency into them (stages_bench_test.go). A DB's
// tracer is nil outside that benchmark; it is set before the DB's first
// Watch and never changed, so reading it needs no lock.
type tracer interface {
	// Wake: something woke the reader; local is a commit of this process,
	// otherwise a NOTIFY.
	Wake(local bool, at time.Time)
	// Query: one read of the log after cursor ran from start to end and
	// resolved it up to next; hole is the revision of the row after a hole
	// (0: none).
	Query(start, end time.Time, cursor, next, hole int64)
	// Emit: a Watch decoded the change at rev and is handing it to its emit.
	Emit(rev int64, at time.Time)
}
