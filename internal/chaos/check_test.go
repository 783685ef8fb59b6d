//go:build linux

package chaos_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/leader"
)

// span is when the leader of one term acted, as far as some records show:
// from the earliest start to the latest end of their intervals.
type span struct {
	term       leader.Term
	id         string
	start, end int64
}

// overlaps reports every pair of consecutive terms (in term order) whose
// spans are not strictly ordered: a later term must start acting after an
// earlier one stopped.
func overlaps(what string, spans map[leader.Term]*span) []string {
	sorted := slices.SortedFunc(maps.Values(spans), func(a, b *span) int { return cmp.Compare(a.term, b.term) })
	var problems []string
	for i := 1; i < len(sorted); i++ {
		prev, s := sorted[i-1], sorted[i]
		if prev.end >= s.start {
			problems = append(problems, fmt.Sprintf("%s: term %d (%s) acted until %d, %s after term %d (%s) started acting at %d",
				what, prev.term, prev.id, prev.end, ms(prev.end-s.start), s.term, s.id, s.start))
		}
	}
	return problems
}

func widen(spans map[leader.Term]*span, term leader.Term, id string, start, end int64) {
	s := spans[term]
	if s == nil {
		spans[term] = &span{term: term, id: id, start: start, end: end}
		return
	}
	s.start, s.end = min(s.start, start), max(s.end, end)
}

// checkRun returns the log's terms in commit order and every violation of
// safety in a run, from the candidates' events, the times they were paused
// (by identity) and the fenced log:
//
//  1. Each term was started by one candidate.
//  2. The elector and the Manager: the intervals in which a candidate
//     acted never overlap between terms, and later terms act later. They
//     are the writes at whose both ends it saw IsLeader true (every write
//     that is not late, whether the fence accepted it, refused it or its
//     outcome is unknown), and the reconciles, whole, including those that
//     went on after SIGTERM within the shutdown grace. Only reconciles
//     during which their candidate was paused, or begun when its lease had
//     lapsed by its own clock (late: after a pause), are left out: there
//     only the fence can help. This does not depend on the fence.
//  3. The fence: in commit order terms never decrease, each term's entries
//     have one identity, and the accepted intervals of different terms do
//     not overlap (the log also holds writes whose candidate was killed
//     before it could report them).
//  4. Every write a candidate saw accepted is in the log; none it saw
//     refused is.
func checkRun(log []candidates.Entry, events []candidates.Event, pauses map[string][]candidates.Pause) (terms []leader.Term, problems []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	paused := func(ev candidates.Event) bool {
		return slices.ContainsFunc(pauses[ev.ID], func(p candidates.Pause) bool { return p.Overlaps(ev.Start, ev.End) })
	}

	startedBy := map[leader.Term]string{}
	acting := map[leader.Term]*span{}
	for _, ev := range events {
		switch {
		case ev.Ev == "leading":
			if id, dup := startedBy[ev.Term]; dup && id != ev.ID {
				bad("term %d was started by %s and by %s", ev.Term, id, ev.ID)
			}
			startedBy[ev.Term] = ev.ID
		case ev.Ev == "write" && !ev.Late,
			ev.Ev == "reconciled" && !ev.Late && !paused(ev):
			widen(acting, ev.Term, ev.ID, ev.Start, ev.End)
		}
	}
	problems = append(problems, overlaps("acting", acting)...)

	if len(log) == 0 {
		bad("the log is empty: the leaders wrote nothing")
	}
	accepted := map[leader.Term]*span{}
	writer := map[leader.Term]string{}
	for i, e := range log {
		if i > 0 && e.Term < log[i-1].Term {
			bad("log entry %d: term %d committed after term %d", i, e.Term, log[i-1].Term)
		}
		if i == 0 || e.Term != log[i-1].Term {
			terms = append(terms, e.Term)
		}
		if id, ok := writer[e.Term]; ok && id != e.Identity {
			bad("log: term %d was written by %s and by %s", e.Term, id, e.Identity)
		}
		writer[e.Term] = e.Identity
		if !e.Late { // written without checking the lease: only its order counts
			widen(accepted, e.Term, e.Identity, e.Start, e.End)
		}
	}
	problems = append(problems, overlaps("fenced log", accepted)...)

	type key struct {
		term leader.Term
		id   string
		end  int64
		late bool
	}
	inLog := map[key]bool{}
	for _, e := range log {
		inLog[key{e.Term, e.Identity, e.End, e.Late}] = true
	}
	for _, ev := range events {
		if ev.Ev != "write" {
			continue
		}
		k := key{ev.Term, ev.ID, ev.End, ev.Late}
		if ev.OK && !inLog[k] {
			bad("accepted write missing from the log: %+v", ev)
		}
		if ev.Refused && inLog[k] {
			bad("refused write in the log: %+v", ev)
		}
	}
	return terms, problems
}

func TestCheckRunShouldReportEveryKindOfViolation(t *testing.T) {
	write := func(id string, term leader.Term, start, end int64, ok bool) candidates.Event {
		return candidates.Event{Ev: "write", ID: id, Term: term, Start: start, End: end, OK: ok, Refused: !ok}
	}
	reconciled := func(id string, term leader.Term, start, end int64, late bool) candidates.Event {
		return candidates.Event{Ev: "reconciled", ID: id, Term: term, Start: start, End: end, Late: late}
	}
	entry := func(id string, term leader.Term, start, end int64) candidates.Entry {
		return candidates.Entry{Term: term, Identity: id, Start: start, End: end}
	}
	good := []candidates.Event{
		{Ev: "leading", ID: "a", Term: 1}, write("a", 1, 0, 10, true), write("a", 1, 10, 20, true),
		{Ev: "write", ID: "a", Term: 1, Start: 50, End: 50, Late: true, Refused: true},
		{Ev: "leading", ID: "b", Term: 2}, write("b", 2, 30, 40, true),
	}
	goodLog := []candidates.Entry{entry("a", 1, 0, 10), entry("a", 1, 10, 20), entry("b", 2, 30, 40)}

	// a was paused from 42 to 44, b from 0 to 5: both after or before what
	// they did, but for one reconcile of a's.
	pauses := map[string][]candidates.Pause{"a": {{Stop: 42, Cont: 44}}, "b": {{Stop: 0, Cont: 5}}}

	for _, c := range []struct {
		name   string
		log    []candidates.Entry
		events []candidates.Event
		want   string // a substring of the one problem expected; "" for none
	}{
		{"a clean run", goodLog, good, ""},
		{"a term started twice", goodLog, append(slices.Clone(good), candidates.Event{Ev: "leading", ID: "c", Term: 2}), "started by b and by c"},
		{"a deposed leader acting after the next started, though refused", goodLog,
			append(slices.Clone(good), write("a", 1, 20, 35, false)), "acting: term 1 (a) acted until 35"},
		{"an earlier term acting later", []candidates.Entry{entry("a", 1, 50, 60)},
			[]candidates.Event{write("a", 1, 50, 60, true), write("b", 2, 0, 10, false)}, "acting: term 1 (a) acted until 60"},
		{"a reconcile going on after the next term started", goodLog,
			append(slices.Clone(good), reconciled("a", 1, 15, 31, false)), "acting: term 1 (a) acted until 31"},
		{"a reconcile of the next term before the last one's ended", goodLog,
			append(slices.Clone(good), reconciled("b", 2, 15, 18, false)), "acting: term 1 (a) acted until 20"},
		{"a late reconcile, begun after the lease lapsed", goodLog,
			append(slices.Clone(good), reconciled("a", 1, 35, 36, true)), ""},
		{"a reconcile during which its candidate was paused", goodLog,
			append(slices.Clone(good), reconciled("a", 1, 15, 43, false)), ""},
		{"terms decreasing in the log", []candidates.Entry{entry("a", 1, 0, 10), entry("b", 2, 30, 40), entry("a", 1, 10, 20)},
			nil, "term 1 committed after term 2"},
		{"a term with two writers", []candidates.Entry{entry("a", 1, 0, 10), entry("c", 1, 10, 20)}, nil, "written by a and by c"},
		{"accepted intervals overlapping in the log", []candidates.Entry{entry("a", 1, 0, 31), entry("b", 2, 30, 40)}, nil,
			"fenced log: term 1 (a) acted until 31"},
		{"an accepted write lost", goodLog[:2], good, "accepted write missing"},
		{"a refused write stored", []candidates.Entry{goodLog[0], goodLog[1], {Term: 1, Identity: "a", Start: 50, End: 50, Late: true}, goodLog[2]},
			good, "refused write in the log"},
		{"an empty log", nil, nil, "the log is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, problems := checkRun(c.log, c.events, pauses)
			if c.want == "" {
				assert.Empty(t, problems)
				return
			}
			if assert.Len(t, problems, 1, "%q", problems) {
				assert.Contains(t, problems[0], c.want)
			}
		})
	}
}
