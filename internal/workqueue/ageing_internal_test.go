package workqueue

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"
)

// The model-based tests run with ageing off (the model has strict
// priorities), so this one checks the ageing bookkeeping itself under random
// operations: the FIFO holds exactly the ready keys, the unstamped count is
// right, and stamps never decrease along the FIFO, so its head is the
// oldest key.
func TestAgeingBookkeepingShouldStayConsistentUnderRandomOperations(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	rapid.Check(t, func(t *rapid.T) {
		clk := clocktesting.NewFakeClock(time.Unix(0, 0))
		opts := []Option{WithClock(clk), WithAgeing(time.Second)}
		if rapid.Bool().Draw(t, "grouped") {
			opts = append(opts, WithGroup(func(k string) string { return k }))
		}
		q := New[string](opts...)
		defer q.ShutDown()
		var held []string
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			key := rapid.SampledFrom(keys).Draw(t, "key")
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				q.AddWithOptions(AddOptions{Priority: rapid.IntRange(-2, 2).Draw(t, "prio")}, key)
			case 1:
				q.AddAfter(key, time.Duration(rapid.IntRange(1, 3).Draw(t, "after"))*300*time.Millisecond)
			case 2:
				if q.Len() > 0 {
					k, _ := q.Get()
					held = append(held, k)
				}
			case 3:
				if len(held) > 0 {
					i := rapid.IntRange(0, len(held)-1).Draw(t, "done")
					q.Done(held[i])
					held = append(held[:i], held[i+1:]...)
				}
			case 4:
				clk.Step(time.Duration(rapid.IntRange(1, 8).Draw(t, "step")) * 250 * time.Millisecond)
			case 5:
				q.Add(key)
			}
			checkAgeing(t, q)
		}
	})
}

func checkAgeing(t *rapid.T, q *Queue[string]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, es := &q.age, q.slab.entries
	n, unstamped, last := 0, 0, int64(-1<<63)
	prev := none
	for i := a.fifo.head; i != none; i = es[i].links[ageLinks].next {
		e := &es[i]
		if e.state != stateReady {
			t.Fatalf("%q is in the FIFO in state %d", e.key, e.state)
		}
		if e.links[ageLinks].prev != prev {
			t.Fatalf("%q: broken back link", e.key)
		}
		stamp := q.slab.times[i]
		if e.unstamped {
			unstamped++
			if !a.sinceSet {
				stamp = last // not ageing yet: no order to check
			} else {
				stamp = a.since
			}
		}
		if stamp < last {
			t.Fatalf("%q: stamp %d after %d: the head is not the oldest", e.key, stamp, last)
		}
		last, prev = stamp, i
		n++
	}
	if prev != a.fifo.tail || n != a.fifo.n {
		t.Fatalf("the FIFO's tail is %d and length %d; its links end at %d after %d", a.fifo.tail, a.fifo.n, prev, n)
	}
	if n != q.ready.n {
		t.Fatalf("%d keys in the FIFO, %d ready", n, q.ready.n)
	}
	if unstamped != a.unstamped {
		t.Fatalf("%d unstamped keys, counted %d", unstamped, a.unstamped)
	}
	if a.unstamped == 0 && a.sinceSet {
		t.Fatalf("since set with no unstamped key")
	}
}
