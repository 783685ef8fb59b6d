//go:build linux

package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/internal/testserver"
)

// Margins over the timings' bounds, for a 2-core machine shared with other
// work and candidates built with -race: the new leader must be scheduled,
// finish its compare-and-swap and its first write.
const (
	killMargin    = 750 * time.Millisecond
	releaseMargin = 500 * time.Millisecond
)

// hold is how long each reconcile of the candidates takes: longer than a
// SIGTERMed leader's successor would need to take over a lease that was
// not renewed (short.killBound), so that a reconcile in progress at the
// SIGTERM overlaps the next term unless the lease is kept until it ends.
const hold = 3 * time.Second

func TestLeadershipOnEtcdShouldStaySafeAndFailOverPromptlyWhileCandidatesAreKilledPausedAndRestarted(t *testing.T) {
	runChaos(t, etcdStore(t, testserver.Etcd(t)))
}

func TestLeadershipOnPostgresShouldStaySafeAndFailOverPromptlyWhileCandidatesAreKilledPausedAndRestarted(t *testing.T) {
	runChaos(t, postgresStore(t, testserver.Postgres(t)))
}

// The rounds of runChaos, in order. Each acts on the current leader or on
// a follower, and ends with a running leader again.
var schedule = []string{
	"kill-leader", "pause-leader", "term-leader", "pause-follower",
	"kill-follower", "kill-leader", "term-leader", "pause-leader",
}

// runChaos runs four candidates on s with the short timings through the
// rounds of schedule, checking fail-over times as it goes, then stops them
// all and checks safety (see checkRun).
func runChaos(t *testing.T, s store) {
	tm := short
	h := newHarness(t, append(slices.Clone(s.Args), append(tm.args(), "-hold", hold.String())...)...)
	const replicas = 4
	for range replicas {
		h.start()
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("%s: seed %d (chooses the followers)", s.Backend, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	var killed, released, paused []time.Duration
	leaderRounds := 0
	for i, action := range schedule {
		l, term := h.leader(tm.killBound(killMargin) + 10*time.Second)
		t.Logf("round %d: %s; leader %s in term %d", i, action, l.ID(), term)
		newTerm := func(what string, timeout time.Duration) candidates.Event {
			return h.await(timeout, what+": a write of a term after "+fmt.Sprint(term), func(ev candidates.Event) bool {
				return ev.Ev == "write" && ev.OK && ev.Term > term
			})
		}
		switch action {
		case "kill-leader":
			leaderRounds++
			at := signal(t, l, syscall.SIGKILL)
			ev := newTerm(action, tm.killBound(killMargin)+10*time.Second)
			d := time.Duration(ev.Done - at)
			killed = append(killed, d)
			assert.LessOrEqual(t, d, tm.killBound(killMargin), "round %d: fail-over after SIGKILL of the leader", i)
			wait(t, l, 10*time.Second)
			h.start()

		case "term-leader":
			leaderRounds++
			// SIGTERM just after a reconcile began: it goes on for about
			// hold, within the shutdown grace, across the SIGTERM.
			since := candidates.Mono()
			inFlight := h.await(hold+10*time.Second, "a reconcile of "+l.ID()+" beginning", func(ev candidates.Event) bool {
				return ev.Ev == "reconciling" && ev.ID == l.ID() && ev.Term == term && ev.Start >= since
			})
			at := signal(t, l, syscall.SIGTERM)
			ev := newTerm(action, hold+tm.killBound(killMargin)+10*time.Second)
			assert.Equal(t, 0, wait(t, l, hold+10*time.Second), "exit code after SIGTERM")
			drained := h.await(0, "the end of the reconcile in flight", func(ev candidates.Event) bool {
				return ev.Ev == "reconciled" && ev.ID == l.ID() && ev.Start == inFlight.Start
			})
			assert.Greater(t, drained.End, at, "round %d: the reconcile in flight spanned the SIGTERM", i)
			next := h.await(0, "the beginning of term "+fmt.Sprint(ev.Term), func(e candidates.Event) bool {
				return e.Ev == "leading" && e.Term == ev.Term
			})
			assert.Less(t, drained.End, next.Start, "round %d: term %d began %v before term %d's last reconcile ended",
				i, ev.Term, ms(drained.End-next.Start), term)
			exit := h.await(0, "the exit of "+l.ID(), func(ev candidates.Event) bool { return ev.Ev == "exit" && ev.ID == l.ID() })
			d := time.Duration(ev.Done - exit.T)
			released = append(released, d)
			assert.LessOrEqual(t, d, tm.retryJ()+releaseMargin, "round %d: fail-over after the SIGTERMed leader released (ReleaseOnCancel)", i)
			t.Logf("round %d: SIGTERM %v into a reconcile, which went on %v after it (cause %q); term %d wrote %v after the release",
				i, ms(at-inFlight.Start), ms(drained.End-at), drained.Err, ev.Term, d.Round(time.Millisecond))
			// Its last write came after its context was cancelled but
			// before it released the lock: no newer term can have written.
			late := h.await(0, "the late write of "+l.ID(), func(ev candidates.Event) bool {
				return ev.Ev == "write" && ev.ID == l.ID() && ev.Late && ev.Term == term
			})
			assert.False(t, late.Refused, "round %d: a write before the release was refused", i)
			h.start()

		case "pause-leader":
			leaderRounds++
			at := signal(t, l, syscall.SIGSTOP)
			ev := newTerm(action, tm.killBound(killMargin)+10*time.Second)
			paused = append(paused, time.Duration(ev.Done-at))
			time.Sleep(tm.retry) // the new leader writes on
			resumed := signal(t, l, syscall.SIGCONT)
			// It wakes up late, finds its lease lapsed by its own clock,
			// and makes the write a reconciler would have in flight: the
			// fence must refuse it, since a newer term has written.
			late := h.await(10*time.Second, "the late write of "+l.ID(), func(ev candidates.Event) bool {
				return ev.Ev == "write" && ev.ID == l.ID() && ev.Late && ev.Term == term
			})
			assert.True(t, late.Refused, "round %d: the deposed leader's late write was not refused: %+v", i, late)
			h.await(10*time.Second, "the end of term "+fmt.Sprint(term), func(ev candidates.Event) bool {
				return ev.Ev == "stopped" && ev.ID == l.ID() && ev.Term == term
			})
			for _, ev := range h.Events() {
				if ev.Ev == "write" && ev.ID == l.ID() && ev.Term == term && ev.OK {
					assert.Less(t, ev.End, resumed, "round %d: a write of the deposed leader from after the pause was accepted: %+v", i, ev)
				}
			}

		case "pause-follower", "kill-follower":
			followers := slices.DeleteFunc(h.Running(), func(p *candidates.Proc) bool { return p == l })
			require.NotEmpty(t, followers)
			f := followers[rng.IntN(len(followers))]
			if action == "pause-follower" {
				// Longer than a lease: the record it timed is long expired
				// by its clock when it wakes, but the leader renewed it.
				signal(t, f, syscall.SIGSTOP)
				time.Sleep(tm.lease + 500*time.Millisecond)
				signal(t, f, syscall.SIGCONT)
			} else {
				signal(t, f, syscall.SIGKILL)
				wait(t, f, 10*time.Second)
				h.start()
			}
			time.Sleep(2 * tm.retryJ()) // time for the follower to act on what it sees
			_, newer := h.Await(0, func(ev candidates.Event) bool { return ev.Ev == "leading" && ev.Term > term })
			assert.False(t, newer, "round %d: %s %s cost the leader its term", i, action, f.ID())
		}
	}
	h.stopAll()

	events := h.Events()
	terms, problems := checkRun(s.readLog(t), events, h.pauses())
	assert.Empty(t, problems, "safety")
	assert.GreaterOrEqual(t, len(terms), 1+leaderRounds, "every round that deposed a leader started a term that wrote")
	ok, refused, failed := writes(events)
	assert.GreaterOrEqual(t, refused, 2, "the late writes of the two paused leaders")
	t.Logf("%s: terms in the log %v; writes: %d accepted, %d refused, %d failed", s.Backend, terms, ok, refused, failed)
	t.Logf("%s: fail-over after SIGKILL %v (bound %v), after a SIGTERMed leader's release %v (bound %v), after SIGSTOP %v",
		s.Backend, killed, tm.killBound(killMargin), released, tm.retryJ()+releaseMargin, paused)
}
