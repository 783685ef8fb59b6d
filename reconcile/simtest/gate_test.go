package simtest

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheGateShouldLetTheWaitingPassThatSortsFirstThroughOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		var mu sync.Mutex
		var through []string
		cancelled, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		for _, order := range []string{"1 reconcile b", "0 event z", "1 reconcile a"} {
			go func() {
				require.NoError(t, g.wait(context.Background(), order))
				mu.Lock()
				through = append(through, order)
				mu.Unlock()
			}()
		}
		go func() { errs <- g.wait(cancelled, "0 event a") }()
		synctest.Wait()
		cancel() // its process ended: it leaves without being let through
		assert.ErrorIs(t, <-errs, context.Canceled)
		assert.Len(t, g.arrived, 1, "the driver is told that passes wait")

		for range 3 {
			require.True(t, g.next())
			synctest.Wait()
		}
		assert.False(t, g.next(), "none left")
		assert.Equal(t, []string{"0 event z", "1 reconcile a", "1 reconcile b"}, through)
	})
}
