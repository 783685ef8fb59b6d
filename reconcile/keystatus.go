package reconcile

import "strconv"

// String describes the status in one line, for a log or a command-line
// tool: how many reconciles failed, the last error, and what happens next
// (a retry at NextRetry, in NextRetry's location to the millisecond, or
// none until the key changes). The zero KeyStatus, a key without failures,
// is "no failures".
func (s KeyStatus) String() string {
	if s.Attempts == 0 && s.LastError == nil {
		return "no failures"
	}
	attempts := strconv.Itoa(s.Attempts) + " failed attempt"
	if s.Attempts != 1 {
		attempts += "s"
	}
	last := "<nil>"
	if s.LastError != nil {
		last = s.LastError.Error()
	}
	switch {
	case s.Terminal:
		return "terminal error after " + attempts + ": " + last + "; not retried until the key changes"
	case s.Parked:
		return "parked after " + attempts + ", last error: " + last + "; not retried until the key changes or is unparked"
	case s.NextRetry.IsZero():
		return attempts + ", last error: " + last
	}
	return attempts + ", last error: " + last + "; retry at " + s.NextRetry.Format("2006-01-02T15:04:05.000Z07:00")
}
