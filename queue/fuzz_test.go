package queue_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/converge-go/converge/queue"
)

// fuzzBytes hands out the fuzzer's bytes one at a time, zeros once they run
// out.
type fuzzBytes []byte

func (b *fuzzBytes) next() byte {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return c
}

func (b *fuzzBytes) key() string { return modelKeys[int(b.next())%len(modelKeys)] }

// quarters is 0..3s in 250ms steps, shifted down by shift quarters.
func (b *fuzzBytes) quarters(shift int) time.Duration {
	return time.Duration(int(b.next())%13-shift) * 250 * time.Millisecond
}

// fuzzKinds weights the operations by their position: one byte picks one.
var fuzzKinds = [32]opKind{
	opAdd, opAdd, opAdd, opAdd,
	opAddAfter, opAddAfter, opAddAfter, opAddAfter,
	opAddWithOptions, opAddWithOptions, opAddWithOptions, opAddWithOptions,
	opAddRateLimited, opAddRateLimited,
	opGet, opGet, opGet, opGet, opGet, opGet, opGet,
	opDone, opDone, opDone, opDone, opDone,
	opForget,
	opStep, opStep, opStep, opStep,
	opShutDown,
}

var fuzzPriorities = [16]int{
	queue.PriorityLow, queue.PriorityNormal, queue.PriorityHigh, queue.PriorityNormal,
	-3, -2, -1, 1, 2, 3, 4, 5, 6,
	math.MaxInt32, 1 << 40, math.MinInt32 - 1,
}

// decodeOp reads one operation, choosing Done's key among the keys in
// flight when the byte says so, so that the fuzzer reaches deep states.
func decodeOp(b *fuzzBytes, m *model) op {
	o := op{kind: fuzzKinds[int(b.next())%len(fuzzKinds)]}
	switch o.kind {
	case opAdd, opAddRateLimited, opForget:
		o.keys = []string{b.key()}
	case opAddAfter:
		o.keys = []string{b.key()}
		o.d = b.quarters(0)
	case opAddWithOptions:
		flags := b.next()
		o.opts = queue.AddOptions{
			After:       b.quarters(1),
			RateLimited: flags&3 == 0,
			Priority:    fuzzPriorities[flags>>4],
		}
		o.keys = []string{b.key()}
		for range int(flags>>2) % 4 % 3 {
			o.keys = append(o.keys, b.key())
		}
	case opDone:
		c := int(b.next())
		if busy := m.busy(); len(busy) > 0 && c < 200 {
			o.keys = []string{busy[c%len(busy)]}
		} else {
			o.keys = []string{modelKeys[c%len(modelKeys)]}
		}
	case opStep:
		if c := b.next(); c >= 240 {
			o.d = time.Minute
		} else {
			o.d = time.Duration(c%13) * 250 * time.Millisecond
		}
	case opShutDown:
		if b.next()&1 == 1 {
			o.kind = opShutDownWithDrain // skipped while keys are in flight
		}
	}
	return o
}

// FuzzQueueAgainstModel runs the operations the input encodes on a queue and
// on the model, comparing them after each one. The first byte turns on
// fairness groups (bit 0) and metrics (bit 1); each operation takes one to
// three bytes.
func FuzzQueueAgainstModel(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 3, 14, 21, 0, 14, 4, 2, 4})
	// Keys due together, in the order their times were set, and a lowered
	// due time that re-sets one of them.
	f.Add([]byte{0, 4, 1, 4, 4, 0, 4, 4, 2, 8, 4, 5, 4, 1, 2, 27, 8, 14, 14, 14})
	// A shutdown with keys ready, in flight and dirty.
	f.Add([]byte{1, 0, 0, 0, 2, 14, 0, 0, 31, 0, 21, 0, 14, 14, 14})
	for seed := range uint64(4) {
		data := make([]byte, 64+64*seed)
		rand.NewChaCha8([32]byte{byte(seed)}).Read(data)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		options := b.next()
		h := newModelHarness(t, options&1 == 1, options&2 == 2)
		for i := 0; len(b) > 0 && i < 400; i++ {
			h.run(decodeOp(&b, h.m))
		}
		h.finish()
	})
}
