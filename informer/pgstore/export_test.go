package pgstore

// ReaderQueries returns the statements a DB's reader and its Watches run
// on every poll, for the tests of their plans.
func ReaderQueries(db *DB) map[string]string {
	return map[string]string{"read": db.q.read, "catchUp": db.q.catchUp, "bounds": db.q.bounds, "anchored": db.q.anchored}
}

// Tracer is told the reader's stage times (trace.go).
type Tracer = tracer

// SetTracer makes t the DB's tracer; call it before the DB's first Watch.
func SetTracer(db *DB, t Tracer) { db.trace = t }
