package queue

import (
	"runtime"
	"sync"
)

// yieldingMutex is a sync.Mutex whose Lock yields the processor a bounded
// number of times before it parks.
//
// The queue's critical sections are a few hundred nanoseconds and never
// block, so a contender that yields usually finds the lock free when it runs
// again. One that parks instead costs a futex wake-up, and once any waiter
// has been parked for 1ms sync.Mutex switches to starvation mode, where every
// Unlock hands the lock to a parked goroutine: under a storm of adds from
// many goroutines, throughput then collapses to the rate of goroutine
// switches (measured: 0.6M instead of 2M items/s with 16 goroutines on 2
// cores). Yielding keeps waiters off the mutex's queue; the bound keeps
// sync.Mutex's fairness guarantee for the pathological case.
type yieldingMutex struct {
	sync.Mutex
}

// yieldsBeforePark bounds the yields of one Lock call. Each is a trip
// through the scheduler (~0.2µs), so the bound is far above any critical
// section and far below a scheduler time slice.
const yieldsBeforePark = 1000

func (m *yieldingMutex) Lock() {
	for range yieldsBeforePark {
		if m.TryLock() {
			return
		}
		runtime.Gosched()
	}
	m.Mutex.Lock()
}
