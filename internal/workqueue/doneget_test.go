package workqueue_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/internal/workqueue"
)

// DoneAndGet hands out the same keys, with the same reasons, as Done then
// GetWithReasons, through adds while keys are processed (dirty keys), delayed
// re-adds of processing keys, priorities and keys that are not processing.
func TestDoneAndGetShouldHandOutWhatDoneThenGetWould(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := clocktesting.NewFakeClock(time.Unix(0, 0))
		opts := []workqueue.Option{workqueue.WithClock(clk), workqueue.WithReasons()}
		split, joined := workqueue.New[string](opts...), workqueue.New[string](opts...)
		keys := []string{"a", "b", "c", "d", "e", "f"}
		var heldSplit, heldJoined []string // keys each worker side holds, in step
		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 4:
				k := keys[rng.IntN(len(keys))]
				o := workqueue.AddOptions{Priority: rng.IntN(3) * 50, Reason: workqueue.Reason{What: uint32(1 + rng.IntN(3))}}
				if rng.IntN(4) == 0 {
					o.After = time.Duration(1+rng.IntN(3)) * time.Second
				}
				split.AddWithOptions(o, k)
				joined.AddWithOptions(o, k)
			case op < 5:
				clk.Step(time.Second)
			case op < 6 && split.Len() > 0:
				var rs, rj workqueue.Reasons
				ks, _ := split.GetWithReasons(&rs)
				kj, _ := joined.GetWithReasons(&rj)
				require.Equal(t, ks, kj, "seed %d step %d: Get", seed, step)
				heldSplit, heldJoined = append(heldSplit, ks), append(heldJoined, kj)
			case len(heldSplit) > 0:
				i := rng.IntN(len(heldSplit))
				ds, dj := heldSplit[i], heldJoined[i]
				heldSplit = append(heldSplit[:i], heldSplit[i+1:]...)
				heldJoined = append(heldJoined[:i], heldJoined[i+1:]...)
				if rng.IntN(5) == 0 {
					ds, dj = "not-processing", "not-processing"
				}
				split.Done(ds)
				if split.Len() == 0 { // DoneAndGet would wait: compare Done alone
					joined.Done(dj)
					continue
				}
				var rs, rj workqueue.Reasons
				ks, _ := split.GetWithReasons(&rs)
				kj, _ := joined.DoneAndGet(dj, &rj)
				require.Equal(t, ks, kj, "seed %d step %d: the key after Done of %q", seed, step, ds)
				assert.Equal(t, rs.List(), rj.List(), "seed %d step %d: reasons of %q", seed, step, ks)
				heldSplit, heldJoined = append(heldSplit, ks), append(heldJoined, kj)
			}
			require.Equal(t, split.Len(), joined.Len(), "seed %d step %d: Len", seed, step)
		}
		split.ShutDown()
		joined.ShutDown()
	}
}
