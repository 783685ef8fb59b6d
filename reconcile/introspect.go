package reconcile

// debugSettings are the options that say what a controller shows of itself
// in logs, spans and debug pages.
type debugSettings struct {
	// noTriggers turns trigger reasons off (WithTriggerReasons(false)).
	noTriggers bool
}
