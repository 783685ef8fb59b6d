package simtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"
	"time"
)

// scheduleFlag reruns one schedule: what a failure report's rerun line
// passes.
var scheduleFlag = flag.String("simtest.schedule", "", "run only this schedule (as a failure report prints it), after the reference run")

// seedFlag and runsFlag override Spec.Seed and Spec.Runs of Sampled mode.
var (
	seedFlag = flag.Uint64("simtest.seed", 0, "first seed of Sampled mode (0: Spec.Seed, or the time)")
	runsFlag = flag.Int("simtest.runs", 0, "schedules of Sampled mode (0: Spec.Runs)")
)

// Mode says which schedules Run tries.
type Mode int

const (
	// Exhaustive crashes the process after each write of the reference
	// run in turn: one schedule per write. For small workloads (tens of
	// writes).
	Exhaustive Mode = iota
	// Sampled runs Runs schedules, the i-th drawn by Sample from seed
	// Seed+i: faults at writes of every kind, and source faults
	// (coalescing, duplicates, expiries). A failing schedule is shrunk.
	Sampled
)

// Spec declares a system under test. W is the user's world: the memory
// stores, and any fake of the outside the controllers act on.
type Spec[W any] struct {
	// World makes a fresh world; called at the start of every run, inside
	// its bubble (so that its stores' goroutines and channels belong to
	// the run).
	World func() W
	// Process builds one incarnation of the controller binary on w: its
	// informers over Wrap(p, ...) of w's stores, its controllers, each
	// started with p.Add or p.Go, reconcilers wrapped with Count. Called
	// at the start and after every crash: it must keep nothing outside p.
	Process func(p *Process, w W) error
	// Workload steps write desired state to w's raw stores (not counted,
	// never crashed). Each runs once StepTime has passed and every
	// process is blocked with nothing waiting at the kit's gate (crashed
	// processes restarted, every event and reconcile let through so far
	// run). That is not "the controllers have acted on the step before":
	// a coalescing window or a stale restart may still hold its events
	// back, which is the fault. A step that must come after them waits
	// with Await on its context.
	Workload []func(ctx context.Context, w W) error
	// Observe returns the end state that must equal the fault-free run's.
	// Leave out what may differ (generated names, times, revisions): it
	// is the differential oracle's "fields to ignore".
	Observe func(w W) any
	// Invariants must hold after every workload step and every liveness
	// tick: each returns nil if it does. Read w's raw stores, not caches.
	Invariants []func(w W) error
	// Converged are invariants of the converged system, checked once,
	// after the quiet window: what may fail while the system works its way
	// there ("never more pods than replicas" does, while scaling down) but
	// must hold once it has. Each returns nil if it does.
	Converged []func(w W) error
	// Mode picks the schedules: Exhaustive (default) or Sampled.
	Mode Mode
	// Runs is how many schedules Sampled mode tries (default 200;
	// -simtest.runs overrides), starting at seed Seed (default: the time,
	// printed; -simtest.seed overrides).
	Runs int
	Seed uint64
	// StaleFor is how long, in virtual time, a process started by a
	// stale restart sees its stores as they were Arg revisions before it
	// started. Default 10 s.
	StaleFor time.Duration
	// Kinds are the faults at writes Sampled mode draws; default
	// DefaultKinds. Add Depose for processes that elect a leader on
	// Process.Clock.
	Kinds []Kind
	// DeposeFor is how long, in virtual time, the successor of a process
	// frozen by a Depose fault runs before the frozen write goes out;
	// longer than the lease, so that it takes over. Default 1 minute.
	DeposeFor time.Duration
	// Idle is how long the system must go without a write to count as
	// converged: longer than anything the process waits for without
	// writing, such as a lease to expire after a crash. Default 1 s.
	Idle time.Duration
	// StepTime is virtual time let pass before each workload step;
	// default 0 (everything is blocked first in any case).
	StepTime time.Duration
	// Converge bounds, in virtual time, how long after the workload the
	// system may take to converge: to stop writing for a tick (1 s,
	// doubling up to a minute). Default 10 minutes.
	Converge time.Duration
	// Quiet is how long the converged system must then stay so, with no
	// write and at most MaxReconcilesPerKey reconciles of any key.
	// Default 10 minutes and 2.
	Quiet               time.Duration
	MaxReconcilesPerKey int
	// Periodic declares the work the converged system does on purpose,
	// by name, with its period: a key reconciled ("controller/key", as
	// Count names it: a re-check every 30 s) or written ("store/key", as
	// Wrap names it, or an Effect's what: a heartbeat every 10 s). A name
	// ending in "*" covers every name it is a prefix of ("ints/*"). The
	// liveness oracle leaves a declared name's writes out of "converged"
	// and "stable", and in the quiet window allows it one write, or
	// reconcile beyond MaxReconcilesPerKey, per period, and one more; more
	// is still a hot loop. Other names stay held to "no write, at most
	// MaxReconcilesPerKey reconciles". A write counts under its key's name
	// or under the reconcile that made it, whichever is declared. A
	// period must be positive, and a name neither empty nor "*" alone
	// (which would turn the oracle off): Check reports such a Spec as its
	// failure. Default: none.
	Periodic map[string]time.Duration
	// Budget bounds the writes, and separately the reconciles, of one
	// run (default 10,000): a controller that loops without letting
	// virtual time pass would otherwise never let the run settle.
	Budget int
}

// validate says what of s cannot be run.
func (s *Spec[W]) validate() error {
	switch {
	case s.World == nil:
		return errors.New("Spec.World is nil: it makes each run's stores")
	case s.Process == nil:
		return errors.New("Spec.Process is nil: it builds the controllers under test")
	case s.Observe == nil:
		return errors.New("Spec.Observe is nil: it returns the end state the runs are compared on")
	}
	for name, d := range s.Periodic {
		if name == "" || name == "*" || d <= 0 {
			return fmt.Errorf("Spec.Periodic[%q] = %v: want a name (or a prefix ending in *) of some keys, and a positive period", name, d)
		}
	}
	return nil
}

func (s *Spec[W]) defaults() {
	if s.Converge <= 0 {
		s.Converge = 10 * time.Minute
	}
	if s.Quiet <= 0 {
		s.Quiet = 10 * time.Minute
	}
	if s.Budget <= 0 {
		s.Budget = 10_000
	}
	if s.MaxReconcilesPerKey <= 0 {
		s.MaxReconcilesPerKey = 2
	}
	if s.Runs <= 0 {
		s.Runs = 200
	}
	if *runsFlag > 0 {
		s.Runs = *runsFlag
	}
	if *seedFlag != 0 {
		s.Seed = *seedFlag
	}
	if s.Seed == 0 {
		s.Seed = uint64(time.Now().UnixNano())
	}
	if s.StaleFor <= 0 {
		s.StaleFor = 10 * time.Second
	}
	if s.DeposeFor <= 0 {
		s.DeposeFor = time.Minute
	}
	if s.Idle <= 0 {
		s.Idle = time.Second
	}
}

// Report is what Check found.
type Report struct {
	// Schedules is how many faulty runs were made (up to and including
	// the first failing one); Writes how many writes the reference run
	// made; FaultPoints how many faults at writes were reached.
	Schedules, Writes, FaultPoints int
	// Mode and Seed are the mode and first seed the schedules came from.
	Mode Mode
	Seed uint64
	// Elapsed is the wall time of every run together, reference
	// included, shrinking and reproducing not.
	Elapsed time.Duration
	// Failure is empty if every run passed; else the report of the first
	// failing schedule. Failed is that schedule shrunk, Found the
	// schedule as drawn.
	Failure       string
	Failed, Found *Schedule
	// Replayed is the one schedule run, given by -simtest.schedule; nil
	// when the schedules came from Mode.
	Replayed *Schedule
}

// Summary is the one line a passing run logs.
func (r *Report) Summary() string {
	how := fmt.Sprintf("exhaustive over %d writes", r.Writes)
	switch {
	case r.Replayed != nil:
		how = fmt.Sprintf("-simtest.schedule='%s', %d writes in the reference", r.Replayed, r.Writes)
	case r.Mode == Sampled:
		how = fmt.Sprintf("sampled from seed %d, %d writes in the reference", r.Seed, r.Writes)
	}
	noun := "schedules"
	if r.Schedules == 1 {
		noun = "schedule"
	}
	return fmt.Sprintf("simtest: %d %s (%s), %d fault points reached, %d runs/s",
		r.Schedules, noun, how, r.FaultPoints, int(float64(r.Schedules+1)/max(r.Elapsed.Seconds(), 1e-9)))
}

// Run is the entry point of a test: it checks spec (see Check), fails t
// with the failure report if a schedule fails, and otherwise logs the
// summary and returns the report, for assertions on what was covered
// (Writes, Schedules, FaultPoints). It takes a *testing.T, not a
// testing.TB: every run is a testing/synctest bubble, which needs one.
func Run[W any](t *testing.T, spec Spec[W]) *Report {
	t.Helper()
	r := Check(t, spec)
	if r.Failure != "" {
		t.Fatal(r.Failure)
	}
	t.Log(r.Summary())
	return r
}

// Check runs the reference run and then every schedule of spec's mode (or
// only -simtest.schedule), and returns the report of the first failure
// instead of failing t: for a test that expects a failure (a known
// finding kept as a test, a planted bug the kit must find). A test that
// expects its spec to pass calls Run.
func Check[W any](t *testing.T, spec Spec[W]) *Report {
	t.Helper()
	spec.defaults()
	began := time.Now()
	r := &Report{Mode: spec.Mode, Seed: spec.Seed}
	if err := spec.validate(); err != nil {
		r.Failure = fmt.Sprintf("simtest: %s: %v", t.Name(), err)
		return r
	}
	ref := execute(t, &spec, Schedule{}, nil)
	r.Writes = ref.writes
	if ref.failure == "" {
		// A reference that ends differently from run to run (two
		// informers racing, say) would make every verdict noise: run it
		// twice and say so.
		if again := execute(t, &spec, Schedule{}, &ref); again.failure != "" {
			ref.oracle, ref.failure = "determinism", fmt.Sprintf("two fault-free runs end differently: %s", diff(ref.observed, again.observed))
		}
	}
	if ref.failure != "" {
		r.Failure = fmt.Sprintf("simtest: %s: the fault-free run fails the %s oracle: %s", t.Name(), ref.oracle, ref.failure)
		r.Failed = &Schedule{}
		r.Elapsed = time.Since(began)
		return r
	}
	next := func(i int) (Schedule, bool) {
		if spec.Mode == Sampled {
			return Sample(spec.Seed+uint64(i), ref.writes, spec.Kinds...), i < spec.Runs
		}
		return Schedule{Faults: []Fault{{Kind: Crash, At: i + 1}}}, i < ref.writes
	}
	if *scheduleFlag != "" {
		s, err := ParseSchedule(*scheduleFlag)
		if err != nil {
			t.Fatal(err)
		}
		next = func(i int) (Schedule, bool) { return s, i == 0 }
		r.Replayed = &s
	}
	for i := 0; ; i++ {
		s, ok := next(i)
		if !ok {
			break
		}
		out := execute(t, &spec, s, &ref)
		r.Schedules++
		r.FaultPoints += out.faults
		if out.failure != "" {
			r.Elapsed = time.Since(began)
			r.Found = &s
			shrunk, sout := shrink(t, &spec, s, &ref, out)
			r.Failed = &shrunk
			r.Failure = failureReport(t, &spec, s, shrunk, &ref, sout)
			return r
		}
	}
	r.Elapsed = time.Since(began)
	return r
}

// shrink simplifies a failing schedule one step at a time, keeping a step
// if the run still fails the same oracle, until no step does (delta
// debugging over a list rarely longer than five). Each step gets two
// tries: a failure that hangs on the scheduler's order between two
// goroutines (two windows closing at one instant) may not come every time.
func shrink[W any](t *testing.T, spec *Spec[W], s Schedule, ref *outcome, out outcome) (Schedule, outcome) {
	for progress := true; progress; {
		progress = false
		for _, c := range s.smaller() {
			for range 2 {
				if o := execute(t, spec, c, ref); o.failure != "" && o.oracle == out.oracle {
					s, out, progress = c, o, true
					break
				}
			}
			if progress {
				break
			}
		}
	}
	return s, out
}
