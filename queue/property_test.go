package queue_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

// Generators for the model-based property test.

var (
	genKey = rapid.SampledFrom(modelKeys)
	// genDelay is 0..3s in 250ms steps, so that due times often tie.
	genDelay = rapid.Custom(func(t *rapid.T) time.Duration {
		return time.Duration(rapid.IntRange(0, 12).Draw(t, "quarters")) * 250 * time.Millisecond
	})
	// genAfter also reaches below zero, which means now.
	genAfter = rapid.Custom(func(t *rapid.T) time.Duration {
		return time.Duration(rapid.IntRange(-1, 12).Draw(t, "quarters")) * 250 * time.Millisecond
	})
	// genPriority mixes the named lanes, a spread of other values (more
	// than the queue keeps idle levels for) and values it must clamp.
	genPriority = rapid.SampledFrom([]int{
		queue.PriorityNormal, queue.PriorityLow, queue.PriorityHigh,
		-5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32 - 1, 1 << 40,
	})
	// genStep is mostly short, sometimes long enough for large backoffs.
	genStep = rapid.OneOf(genDelay, rapid.Just(time.Minute))
)

// drawOp draws an operation that is valid in the model's current state: Get
// only when it would not block, Done mostly of a key in flight.
func drawOp(t *rapid.T, m *model) op {
	kinds := []opKind{opAdd, opAdd, opAddAfter, opAddAfter, opAddWithOptions, opAddWithOptions,
		opAddRateLimited, opDone, opDone, opForget, opStep, opStep, opStep}
	if m.canGet() {
		kinds = append(kinds, opGet, opGet, opGet, opGet)
	}
	o := op{kind: rapid.SampledFrom(kinds).Draw(t, "kind")}
	switch o.kind {
	case opAdd, opAddRateLimited, opForget:
		o.keys = []string{genKey.Draw(t, "key")}
	case opAddAfter:
		o.keys = []string{genKey.Draw(t, "key")}
		o.d = genDelay.Draw(t, "delay")
	case opAddWithOptions:
		o.opts = queue.AddOptions{
			After:       genAfter.Draw(t, "after"),
			RateLimited: rapid.IntRange(0, 3).Draw(t, "rateLimited") == 0,
			Priority:    genPriority.Draw(t, "priority"),
		}
		o.keys = rapid.SliceOfN(genKey, 1, 3).Draw(t, "keys")
	case opDone:
		if busy := m.busy(); len(busy) > 0 && rapid.IntRange(0, 5).Draw(t, "notBusy") > 0 {
			o.keys = []string{rapid.SampledFrom(busy).Draw(t, "busyKey")}
		} else {
			o.keys = []string{genKey.Draw(t, "key")}
		}
	case opStep:
		o.d = genStep.Draw(t, "step")
	}
	return o
}

func TestQueueShouldMatchTheModelUnderRandomOperations(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newModelHarness(t, rapid.Bool().Draw(t, "grouped"), rapid.Bool().Draw(t, "metrics"))
		// Runs are long (rapid draws small numbers more often), which costs
		// nothing when shrinking: the operations after a failure never run.
		n := 200 - rapid.IntRange(0, 199).Draw(t, "fewerOps")
		// One run in three shuts down, mostly late, and goes on.
		shutDownAt := -1
		if rapid.IntRange(0, 2).Draw(t, "shutDown") == 2 {
			shutDownAt = n - 1 - rapid.IntRange(0, n-1).Draw(t, "shutDownBeforeEnd")
		}
		for i := range n {
			if i == shutDownAt {
				kind := opShutDown
				if len(h.m.busy()) == 0 && rapid.Bool().Draw(t, "drain") {
					kind = opShutDownWithDrain
				}
				h.run(op{kind: kind})
			}
			h.run(drawOp(t, h.m))
		}
		h.finish()
	})
}

// TestQueueShouldKeepItsContractsUnderConcurrentRandomOperations hammers a
// queue on the real clock with every kind of add from several goroutines
// while workers Get and Done, in a different mix per round. Workers fail
// some keys (AddRateLimited, as a controller does) and Forget the others.
// It checks that no key is ever handed to two workers at once and that every
// key's last add from a producer is processed.
func TestQueueShouldKeepItsContractsUnderConcurrentRandomOperations(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	for round := range uint64(4) {
		seed := seed + round
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runConcurrentRound(t, seed)
		})
	}
}

func runConcurrentRound(t *testing.T, seed uint64) {
	const keys, producers, workers, addsEach = 32, 4, 6, 5000
	mix := rand.New(rand.NewPCG(seed, 0))
	// weights of Add, AddAfter, AddWithOptions, AddRateLimited, Forget
	weights := make([]int, 5)
	for i := range weights {
		weights[i] = mix.IntN(4)
	}
	weights[0]++ // never all zero
	failPercent := mix.IntN(40)
	grouped := mix.IntN(2) == 0
	t.Logf("mix: add kinds weighted %v, workers fail %d%%, groups %v", weights, failPercent, grouped)
	opts := []queue.Option{queue.WithRateLimiter[int](backoff.NewPerKey[int](
		backoff.Exponential{Base: 20 * time.Microsecond, Cap: time.Millisecond}))}
	if grouped {
		opts = append(opts, queue.WithGroup(func(k int) string { return string(rune('a' + k%3)) }))
	}
	q := must.Do(queue.New[int](opts...))
	t.Cleanup(q.ShutDown)

	var (
		busy    [keys]sync.Mutex // TryLock fails if another worker holds the key
		version [keys]int64      // guarded by verMu: adds made by producers
		seen    [keys]int64      // guarded by verMu: version when last processed
		verMu   sync.Mutex
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(100+w)))
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				if !busy[k].TryLock() {
					t.Errorf("key %d handed to two workers", k)
					q.Done(k)
					continue
				}
				verMu.Lock()
				seen[k] = version[k]
				verMu.Unlock()
				if r.IntN(4) == 0 {
					runtime.Gosched() // hold the key a little longer
				}
				if r.IntN(100) < failPercent {
					q.AddRateLimited(k)
				} else {
					q.Forget(k)
				}
				busy[k].Unlock()
				q.Done(k)
			}
		}()
	}

	var producersWG sync.WaitGroup
	for p := range producers {
		producersWG.Add(1)
		go func() {
			defer producersWG.Done()
			r := rand.New(rand.NewPCG(seed, uint64(p)))
			total := 0
			for _, w := range weights {
				total += w
			}
			for range addsEach {
				if r.IntN(4) == 0 {
					runtime.Gosched() // let workers interleave with the adds
				}
				k := r.IntN(keys)
				kind, x := 0, r.IntN(total)
				for x >= weights[kind] {
					x -= weights[kind]
					kind++
				}
				if kind == 4 {
					q.Forget(k) // not an add: the version stays
					continue
				}
				verMu.Lock()
				version[k]++
				if kind == 2 {
					version[(k+1)%keys]++ // AddWithOptions below adds two keys
				}
				verMu.Unlock()
				switch kind {
				case 0:
					q.Add(k)
				case 1:
					q.AddAfter(k, time.Duration(r.IntN(3))*time.Millisecond)
				case 2:
					q.AddWithOptions(queue.AddOptions{
						After:       time.Duration(r.IntN(4)-1) * 500 * time.Microsecond,
						RateLimited: r.IntN(3) == 0,
						Priority:    []int{queue.PriorityLow, queue.PriorityNormal, queue.PriorityHigh, 7}[r.IntN(4)],
					}, k, (k+1)%keys)
				case 3:
					q.AddRateLimited(k)
				}
			}
		}()
	}
	producersWG.Wait()
	require.Eventually(t, func() bool {
		verMu.Lock()
		defer verMu.Unlock()
		return seen == version
	}, 10*time.Second, time.Millisecond, "every key's last add must be processed")
	q.ShutDownWithDrain()
	wg.Wait()
}
