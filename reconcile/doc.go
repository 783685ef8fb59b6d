// Package reconcile will run level-triggered controllers: it will define
// Reconciler[K], the function a program writes to drive one key's observed
// state towards its desired state; Result, for requeueing after a delay;
// terminal errors, which are counted but never retried; Controller[K], which
// composes an informer's events, mappers and predicates with a work queue and
// N workers, recovering panics, applying per-reconcile timeouts and backoff on
// error, and recording controller-runtime-compatible metrics and slog logs;
// and Manager, which runs controllers, informers and leader election together
// and serves health, readiness and metrics over HTTP. Reconcile is called with
// a key, never an event, and reads current state itself. The package contains
// no backend-specific code.
//
// Status: not implemented yet; see the project's issues.
package reconcile
