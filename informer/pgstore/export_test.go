package pgstore

// ReaderQueries returns the statements a DB's reader and its Watches run
// on every poll, for the tests of their plans.
func ReaderQueries(db *DB) map[string]string {
	return map[string]string{"read": db.q.read, "catchUp": db.q.catchUp, "bounds": db.q.bounds, "anchored": db.q.anchored}
}
