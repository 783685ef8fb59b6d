package simtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what a Fault does at its write.
type Kind int

const (
	// Crash: the process dies right after write At commits, and a fresh
	// one starts on the same stores (Sieve's intermediate state).
	Crash Kind = iota
	// Stale: a crash after write At, and the fresh process's informers
	// list Arg revisions behind each store and see no change for
	// Spec.StaleFor, as behind a lagging replica (Sieve's stale state).
	Stale
	// Panic: write At commits, then the reconcile panics; the controller
	// recovers and retries with its caches intact. At a write made
	// outside a Count-wrapped reconcile (a goroutine of Process.Go),
	// where nothing recovers it, the process dies: a crash.
	Panic
	// Ambiguous: write At commits, but the reconciler is told
	// context.DeadlineExceeded, as after a client timeout: it cannot
	// know whether the write happened.
	Ambiguous
	// Depose: the process freezes just before write At (a long GC pause,
	// a SIGSTOP): the write waits, and so do the timers of its Clock, so
	// its elector neither renews nor notices anything. A fresh process
	// starts beside it and runs for Spec.DeposeFor, taking the lease over
	// once it expires; then the frozen write goes out, with the old
	// term's context still live, the old process's work runs on for a
	// second (a conflict retried, say), and only then do its timers fire:
	// it notices it was deposed, and ends. Fencing must refuse its writes.
	// Not drawn by Sample unless asked for (Spec.Kinds).
	Depose
)

var kindNames = []string{Crash: "crash", Stale: "stale", Panic: "panic", Ambiguous: "ambiguous", Depose: "depose"}

// DefaultKinds are the faults at writes that Sample draws by default:
// those that need nothing of the process. Depose needs a process that
// elects a leader on its Clock.
var DefaultKinds = []Kind{Crash, Stale, Panic, Ambiguous}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one fault at one write of a run: writes are numbered from 1
// across the run's processes, in the order they are made.
type Fault struct {
	Kind Kind
	At   int
	Arg  int // Stale: the lag in revisions
}

func (f Fault) String() string {
	if f.Kind == Stale {
		return fmt.Sprintf("stale@%d:%d", f.At, f.Arg)
	}
	return fmt.Sprintf("%s@%d", f.Kind, f.At)
}

// Schedule is the faults of one run: faults at writes, and faults of
// every store's source (what the informers are sent), drawn from Seed.
type Schedule struct {
	// Seed seeds the source faults' draws (informer/faults).
	Seed   uint64
	Faults []Fault
	// Coalesce: every source holds its events in windows of this long
	// and emits only each key's latest (unobserved intermediate states).
	Coalesce time.Duration
	// Duplicate and Expire are the rates of duplicated events and of
	// watches that expire (the informer lists again).
	Duplicate, Expire float64
}

// sourceFaults says whether the schedule needs informer/faults.
func (s Schedule) sourceFaults() bool { return s.Coalesce > 0 || s.Duplicate > 0 || s.Expire > 0 }

// String is the schedule as -simtest.schedule takes it, for example
// "seed=3 crash@7 stale@12:2 coalesce=2s dup=0.1 expire=0.05"; "none"
// for the fault-free run. The seed is printed only with source faults.
func (s Schedule) String() string {
	var parts []string
	if s.sourceFaults() {
		parts = append(parts, fmt.Sprintf("seed=%d", s.Seed))
	}
	for _, f := range s.Faults {
		parts = append(parts, f.String())
	}
	if s.Coalesce > 0 {
		parts = append(parts, "coalesce="+s.Coalesce.String())
	}
	if s.Duplicate > 0 {
		parts = append(parts, "dup="+strconv.FormatFloat(s.Duplicate, 'g', -1, 64))
	}
	if s.Expire > 0 {
		parts = append(parts, "expire="+strconv.FormatFloat(s.Expire, 'g', -1, 64))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// ParseSchedule reads what Schedule.String writes. "crash@3,7" is two
// crashes. Two faults at one write are an error.
func ParseSchedule(s string) (Schedule, error) {
	var sch Schedule
	bad := func(part, why string) (Schedule, error) {
		return Schedule{}, fmt.Errorf("simtest: schedule %q: %q: %s", s, part, why)
	}
	if s == "none" {
		return sch, nil
	}
	if strings.TrimSpace(s) == "" {
		return bad(s, "empty (want none, or faults such as crash@3 stale@5:2 coalesce=2s)")
	}
	for part := range strings.FieldsSeq(s) {
		name, val, isSetting := strings.Cut(part, "=")
		if isSetting {
			var err error
			switch name {
			case "seed":
				sch.Seed, err = strconv.ParseUint(val, 10, 64)
			case "coalesce":
				sch.Coalesce, err = time.ParseDuration(val)
			case "dup":
				sch.Duplicate, err = strconv.ParseFloat(val, 64)
			case "expire":
				sch.Expire, err = strconv.ParseFloat(val, 64)
			default:
				return bad(part, "unknown setting")
			}
			if err != nil {
				return bad(part, err.Error())
			}
			continue
		}
		kind, at, ok := strings.Cut(part, "@")
		k := Kind(slices.Index(kindNames, kind))
		if !ok || k < 0 {
			return bad(part, "want kind@N, kind one of "+strings.Join(kindNames, ", "))
		}
		for f := range strings.SplitSeq(at, ",") {
			n, arg, hasArg := strings.Cut(f, ":")
			fault := Fault{Kind: k}
			var err error
			if fault.At, err = strconv.Atoi(n); err != nil || fault.At < 1 {
				return bad(part, "bad write number")
			}
			if hasArg != (k == Stale) {
				return bad(part, "stale takes a lag (stale@N:LAG), the others none")
			}
			if hasArg {
				if fault.Arg, err = strconv.Atoi(arg); err != nil || fault.Arg < 1 {
					return bad(part, "bad lag")
				}
			}
			if slices.ContainsFunc(sch.Faults, func(g Fault) bool { return g.At == fault.At }) {
				return bad(part, fmt.Sprintf("two faults at write %d: a write takes one", fault.At))
			}
			sch.Faults = append(sch.Faults, fault)
		}
	}
	return sch, nil
}

// Sample draws schedule seed's faults for a run whose reference made
// writes writes: one or two faults at writes, never two at one write, of
// kinds (DefaultKinds if none), and, each with some chance, coalescing, duplicates and expiries.
// The same arguments give the same schedule.
func Sample(seed uint64, writes int, kinds ...Kind) Schedule {
	if len(kinds) == 0 {
		kinds = DefaultKinds
	}
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	s := Schedule{Seed: seed}
	if writes > 0 {
		for range 1 + rnd.IntN(2) {
			f := Fault{Kind: kinds[rnd.IntN(len(kinds))], At: 1 + rnd.IntN(writes)}
			if f.Kind == Stale {
				f.Arg = 1 + rnd.IntN(3)
			}
			if len(s.Faults) > 0 && s.Faults[0].At == f.At {
				// One fault a write: the next write instead (the draws stay
				// those of every other seed), or none if there is no other.
				if writes < 2 {
					continue
				}
				f.At = f.At%writes + 1
			}
			s.Faults = append(s.Faults, f)
		}
		slices.SortFunc(s.Faults, func(a, b Fault) int { return a.At - b.At })
	}
	if rnd.IntN(3) == 0 {
		s.Coalesce = time.Duration(1+rnd.IntN(5)) * time.Second
	}
	if rnd.IntN(4) == 0 {
		s.Duplicate = 0.2
	}
	if rnd.IntN(6) == 0 {
		s.Expire = 0.05
	}
	return s
}

// smaller returns the schedules one step simpler than s, simplest first:
// each fault dropped, each source fault dropped, a stale lag of 1, a
// shorter window. Shrinking keeps the first that still fails.
func (s Schedule) smaller() []Schedule {
	var out []Schedule
	with := func(f func(*Schedule)) {
		c := s
		c.Faults = slices.Clone(s.Faults)
		f(&c)
		out = append(out, c)
	}
	for i := range s.Faults {
		with(func(c *Schedule) { c.Faults = slices.Delete(c.Faults, i, i+1) })
	}
	if s.Coalesce > 0 {
		with(func(c *Schedule) { c.Coalesce = 0 })
	}
	if s.Duplicate > 0 {
		with(func(c *Schedule) { c.Duplicate = 0 })
	}
	if s.Expire > 0 {
		with(func(c *Schedule) { c.Expire = 0 })
	}
	for i, f := range s.Faults {
		if f.Kind == Stale && f.Arg > 1 {
			with(func(c *Schedule) { c.Faults[i].Arg = 1 })
		}
		if f.Kind != Crash {
			with(func(c *Schedule) { c.Faults[i] = Fault{Kind: Crash, At: f.At} })
		}
	}
	if s.Coalesce > time.Second {
		with(func(c *Schedule) { c.Coalesce = max(time.Second, c.Coalesce/2) })
	}
	return out
}
