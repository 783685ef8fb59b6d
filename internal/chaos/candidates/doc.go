// Package candidates builds and runs internal/chaos/candidate processes and
// reads their events: the harness shared by the chaos tests of package
// internal/chaos and the fail-over benchmarks of package bench.
//
// Binary builds the candidate once (with -race when the program using it
// is built with -race). A Group starts candidates with common flags,
// collects the events (Event) they print, and signals, kills and reaps
// them (Proc). NewEtcdStore and NewPostgresStore create the fresh lock,
// fence and log a run needs in a backend, and read back the fenced log
// (Entry). Event, Entry and Mono also define the candidate's output, so
// that its format is written once.
//
// Nothing here fails a test: every function returns an error and the
// caller asserts. The package needs Linux.
package candidates
