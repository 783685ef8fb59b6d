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

	"github.com/converge-go/converge/internal/testserver"
)

// Margins over the timings' bounds, for a 2-core machine shared with other
// work and candidates built with -race: the new leader must be scheduled,
// finish its compare-and-swap and its first write.
const (
	killMargin    = 750 * time.Millisecond
	releaseMargin = 500 * time.Millisecond
)

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
	h := newHarness(t, append(slices.Clone(s.args), tm.args()...)...)
	const candidates = 4
	for range candidates {
		h.start()
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("%s: seed %d (chooses the followers)", s.name, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	var killed, released, paused []time.Duration
	leaderRounds := 0
	for i, action := range schedule {
		l, term := h.leader(tm.killBound(killMargin) + 10*time.Second)
		t.Logf("round %d: %s; leader %s in term %d", i, action, l.id, term)
		newTerm := func(what string, timeout time.Duration) event {
			return h.await(timeout, what+": a write of a term after "+fmt.Sprint(term), func(ev event) bool {
				return ev.Ev == "write" && ev.OK && ev.Term > term
			})
		}
		switch action {
		case "kill-leader":
			leaderRounds++
			at := l.signal(t, syscall.SIGKILL)
			ev := newTerm(action, tm.killBound(killMargin)+10*time.Second)
			d := time.Duration(ev.Done - at)
			killed = append(killed, d)
			assert.LessOrEqual(t, d, tm.killBound(killMargin), "round %d: fail-over after SIGKILL of the leader", i)
			l.wait(t, 10*time.Second)
			h.start()

		case "term-leader":
			leaderRounds++
			at := l.signal(t, syscall.SIGTERM)
			ev := newTerm(action, tm.killBound(killMargin)+10*time.Second)
			d := time.Duration(ev.Done - at)
			released = append(released, d)
			assert.LessOrEqual(t, d, tm.retryJ()+releaseMargin, "round %d: fail-over after SIGTERM (ReleaseOnCancel) of the leader", i)
			assert.Equal(t, 0, l.wait(t, 10*time.Second), "exit code after SIGTERM")
			// Its last write came after its context was cancelled but
			// before it released the lock: no newer term can have written.
			late := h.await(0, "the late write of "+l.id, func(ev event) bool {
				return ev.Ev == "write" && ev.ID == l.id && ev.Late && ev.Term == term
			})
			assert.False(t, late.Refused, "round %d: a write before the release was refused", i)
			h.start()

		case "pause-leader":
			leaderRounds++
			at := l.signal(t, syscall.SIGSTOP)
			ev := newTerm(action, tm.killBound(killMargin)+10*time.Second)
			paused = append(paused, time.Duration(ev.Done-at))
			time.Sleep(tm.retry) // the new leader writes on
			resumed := l.signal(t, syscall.SIGCONT)
			// It wakes up late, finds its lease lapsed by its own clock,
			// and makes the write a reconciler would have in flight: the
			// fence must refuse it, since a newer term has written.
			late := h.await(10*time.Second, "the late write of "+l.id, func(ev event) bool {
				return ev.Ev == "write" && ev.ID == l.id && ev.Late && ev.Term == term
			})
			assert.True(t, late.Refused, "round %d: the deposed leader's late write was not refused: %+v", i, late)
			h.await(10*time.Second, "the end of term "+fmt.Sprint(term), func(ev event) bool {
				return ev.Ev == "stopped" && ev.ID == l.id && ev.Term == term
			})
			for _, ev := range h.snapshot() {
				if ev.Ev == "write" && ev.ID == l.id && ev.Term == term && ev.OK {
					assert.Less(t, ev.End, resumed, "round %d: a write of the deposed leader from after the pause was accepted: %+v", i, ev)
				}
			}

		case "pause-follower", "kill-follower":
			followers := slices.DeleteFunc(h.running(), func(p *proc) bool { return p == l })
			require.NotEmpty(t, followers)
			f := followers[rng.IntN(len(followers))]
			if action == "pause-follower" {
				// Longer than a lease: the record it timed is long expired
				// by its clock when it wakes, but the leader renewed it.
				f.signal(t, syscall.SIGSTOP)
				time.Sleep(tm.lease + 500*time.Millisecond)
				f.signal(t, syscall.SIGCONT)
			} else {
				f.signal(t, syscall.SIGKILL)
				f.wait(t, 10*time.Second)
				h.start()
			}
			time.Sleep(2 * tm.retryJ()) // time for the follower to act on what it sees
			_, newer := h.awaitOK(0, func(ev event) bool { return ev.Ev == "leading" && ev.Term > term })
			assert.False(t, newer, "round %d: %s %s cost the leader its term", i, action, f.id)
		}
	}
	h.stopAll()

	events := h.snapshot()
	terms, problems := checkRun(s.readLog(t), events)
	assert.Empty(t, problems, "safety")
	assert.GreaterOrEqual(t, len(terms), 1+leaderRounds, "every round that deposed a leader started a term that wrote")
	ok, refused, failed := writes(events)
	assert.GreaterOrEqual(t, refused, 2, "the late writes of the two paused leaders")
	t.Logf("%s: terms in the log %v; writes: %d accepted, %d refused, %d failed", s.name, terms, ok, refused, failed)
	t.Logf("%s: fail-over after SIGKILL %v (bound %v), after SIGTERM %v (bound %v), after SIGSTOP %v",
		s.name, killed, tm.killBound(killMargin), released, tm.retryJ()+releaseMargin, paused)
}
