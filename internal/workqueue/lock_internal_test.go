package workqueue

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestMutex() *bargingMutex {
	m := &bargingMutex{}
	m.init()
	return m
}

func TestABargingMutexShouldParkALockerWhileHeldAndWakeItOnUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestMutex()
		m.Lock()
		acquired := make(chan struct{})
		go func() {
			m.Lock()
			close(acquired)
			m.Unlock()
		}()
		synctest.Wait() // the second Lock has spun and parked on wakeup

		select {
		case <-acquired:
			t.Fatal("Lock returned while the mutex was held")
		default:
		}
		assert.Equal(t, int32(contended), m.state.Load(), "a parked locker marks the mutex contended")

		m.Unlock()
		<-acquired
		synctest.Wait()
		assert.Equal(t, int32(unlocked), m.state.Load())
	})
}

func TestABargingMutexShouldWakeEveryParkedLockerInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestMutex()
		m.Lock()
		const lockers = 5
		var wg sync.WaitGroup
		held := 0
		for range lockers {
			wg.Go(func() {
				m.Lock()
				held++
				m.Unlock()
			})
		}
		synctest.Wait() // all parked: one Unlock wakes one, whose Unlock wakes the next
		m.Unlock()
		wg.Wait()
		assert.Equal(t, lockers, held)
		assert.Equal(t, int32(unlocked), m.state.Load())
	})
}

func TestABargingMutexShouldExcludeConcurrentHolders(t *testing.T) {
	m := newTestMutex()
	const goroutines, rounds = 16, 2000
	var wg sync.WaitGroup
	holders, count := 0, 0
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				m.Lock()
				holders++
				if holders != 1 {
					panic("two holders") // the race detector also reports it
				}
				count++
				holders--
				m.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, goroutines*rounds, count)
	assert.Equal(t, int32(unlocked), m.state.Load())
}
