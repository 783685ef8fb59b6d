package simtest

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scheduleFlag reruns one schedule: what a failure report's rerun line
// passes.
var scheduleFlag = flag.String("simtest.schedule", "", "run only this schedule (as a failure report prints it), after the reference run")

// Mode says which schedules Run tries.
type Mode int

const (
	// Exhaustive crashes the process after each write of the reference
	// run in turn: one schedule per write. For small workloads (tens of
	// writes).
	Exhaustive Mode = iota
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
	// never crashed). Each runs once the system has settled and StepTime
	// has passed.
	Workload []func(ctx context.Context, w W) error
	// Observe returns the end state that must equal the fault-free run's.
	// Leave out what may differ (generated names, times, revisions): it
	// is the differential oracle's "fields to ignore".
	Observe func(w W) any
	// Invariants must hold after every workload step and every liveness
	// tick: each returns nil if it does. Read w's raw stores, not caches.
	Invariants []func(w W) error
	// Mode picks the schedules; Exhaustive is the only one built so far.
	Mode Mode
	// StepTime is virtual time let pass before each workload step;
	// default 0 (the system settles first in any case).
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
	// Budget bounds the writes, and separately the reconciles, of one
	// run (default 10,000): a controller that loops without letting
	// virtual time pass would otherwise never let the run settle.
	Budget int
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
}

// Schedule is the faults of one run: the writes after which the process
// crashes, numbered from 1 across the run.
type Schedule struct {
	Crashes []int
}

// String is the schedule as -simtest.schedule takes it: "crash@3,7";
// "none" for the fault-free run.
func (s Schedule) String() string {
	if len(s.Crashes) == 0 {
		return "none"
	}
	parts := make([]string, len(s.Crashes))
	for i, n := range s.Crashes {
		parts[i] = strconv.Itoa(n)
	}
	return "crash@" + strings.Join(parts, ",")
}

// ParseSchedule reads what Schedule.String writes.
func ParseSchedule(s string) (Schedule, error) {
	if s == "none" {
		return Schedule{}, nil
	}
	list, ok := strings.CutPrefix(s, "crash@")
	if !ok {
		return Schedule{}, fmt.Errorf("simtest: schedule %q: want crash@N[,N...] or none", s)
	}
	var sch Schedule
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return Schedule{}, fmt.Errorf("simtest: schedule %q: bad write number %q", s, f)
		}
		sch.Crashes = append(sch.Crashes, n)
	}
	return sch, nil
}

// Report is what Check found.
type Report struct {
	// Schedules is how many faulty runs were made; Writes how many writes
	// the reference run made; CrashPoints how many crashes were reached.
	Schedules, Writes, CrashPoints int
	// Elapsed is the wall time of every run together, reference included.
	Elapsed time.Duration
	// Failure is empty if every run passed; else the report of the first
	// failing schedule, Failed its schedule.
	Failure string
	Failed  *Schedule
}

// Summary is the one line a passing run logs.
func (r *Report) Summary() string {
	return fmt.Sprintf("simtest: %d schedules (exhaustive over %d writes), %d crash points reached, %d runs/s",
		r.Schedules, r.Writes, r.CrashPoints, int(float64(r.Schedules+1)/max(r.Elapsed.Seconds(), 1e-9)))
}

// Run checks spec and fails t with the report if a schedule fails; else
// it logs the summary.
func Run[W any](t *testing.T, spec Spec[W]) {
	t.Helper()
	r := Check(t, spec)
	if r.Failure != "" {
		t.Fatal(r.Failure)
	}
	t.Log(r.Summary())
}

// Check runs the reference run and then every schedule of spec's mode (or
// only -simtest.schedule), and reports the first failure instead of
// failing t: for tests of the kit itself, and of bugs it must find.
func Check[W any](t *testing.T, spec Spec[W]) *Report {
	t.Helper()
	spec.defaults()
	began := time.Now()
	r := &Report{}
	ref := execute(t, &spec, Schedule{}, nil)
	r.Writes = ref.writes
	if ref.failure != "" {
		r.Failure = fmt.Sprintf("simtest: %s: the fault-free run fails the %s oracle: %s", t.Name(), ref.oracle, ref.failure)
		r.Failed = &Schedule{}
		r.Elapsed = time.Since(began)
		return r
	}
	var schedules []Schedule
	if *scheduleFlag != "" {
		s, err := ParseSchedule(*scheduleFlag)
		if err != nil {
			t.Fatal(err)
		}
		schedules = []Schedule{s}
	} else {
		for n := 1; n <= ref.writes; n++ {
			schedules = append(schedules, Schedule{Crashes: []int{n}})
		}
	}
	for _, s := range schedules {
		out := execute(t, &spec, s, &ref)
		r.Schedules++
		r.CrashPoints += out.crashes
		if out.failure != "" {
			r.Failed = &s
			r.Failure = failureReport(t, &spec, s, &ref, out)
			break
		}
	}
	r.Elapsed = time.Since(began)
	return r
}

// failureReport reruns a failing schedule twice more (the Go scheduler is
// not under the kit's control, §5 of the design) and formats the report.
func failureReport[W any](t *testing.T, spec *Spec[W], s Schedule, ref *outcome, out outcome) string {
	again := 1
	for range 2 {
		if o := execute(t, spec, s, ref); o.failure != "" {
			again++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "simtest: %s: %s oracle failed (reproduced %d/3)\n", t.Name(), out.oracle, again)
	fmt.Fprintf(&b, "  schedule: %s\n", s)
	fmt.Fprintf(&b, "  %s\n", out.failure)
	for _, w := range out.log {
		if w.crashed {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	if out.oracle == "differential" {
		fmt.Fprintf(&b, "  observed: %s\n", diff(ref.observed, out.observed))
	}
	fmt.Fprintf(&b, "  rerun: go test -run '^%s$' -args -simtest.schedule='%s'", t.Name(), s)
	return b.String()
}

// diff shows both end states; Observe's values are small by design.
func diff(want, got any) string {
	return fmt.Sprintf("reference %+v, this run %+v", want, got)
}
