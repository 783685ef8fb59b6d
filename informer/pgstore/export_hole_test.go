package pgstore

import "time"

// SetHoleWarnAfter makes the readers warn about a hole after d instead of a
// second, until the returned restore is called.
func SetHoleWarnAfter(d time.Duration) (restore func()) {
	was := holeWarnAfter.Swap(int64(d))
	return func() { holeWarnAfter.Store(was) }
}
