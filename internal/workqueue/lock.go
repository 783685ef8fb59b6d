package workqueue

import "sync/atomic"

// bargingMutex is the queue's lock: a mutex that a running goroutine may
// always take ahead of parked ones, and that never hands itself over to a
// parked goroutine.
//
// sync.Mutex switches to starvation mode once a waiter has waited 1 ms, and
// from then on every Unlock hands the lock to the oldest waiter and yields
// the processor to it. With more goroutines than processors (16 on 2 in
// bench scenario 1) a woken waiter often sits in a run queue for over 1 ms,
// so the queue's mutex fell into that mode in some runs and not others:
// every Add, Get and Done then cost a goroutine switch, and throughput
// halved (the slow repetitions of the paired-throughput benchmark; the scheduler trace showed
// 60% of the delay in Unlock's yield, docs/design/queue-lock.md).
//
// Here Unlock only wakes one parked goroutine, which then competes with
// any that are running. Nobody waits on this lock for long in the queue's
// fairness-sensitive paths: a Get with nothing to do parks on a waiter of
// its own and is handed its key (handoff.go), and the critical sections are
// short. It spins only briefly and never yields the processor (a
// runtime.Gosched loop was what made the old yielding mutex's tail
// bimodal), so a waiter is either running or parked.
//
// It is the classic three-state futex mutex, with a channel as the futex.
type bargingMutex struct {
	// state is unlocked, locked, or contended: locked and some goroutine
	// may be parked on wakeup. Only Lock's slow path sets contended, and
	// a goroutine parks only after it set it while the lock was held, so
	// the holder's Unlock sees it and sends a wake-up.
	state atomic.Int32
	// wakeup is buffered(1). A wake-up that finds it full is dropped: the
	// one already there wakes a goroutine, which retries and, if it loses,
	// sets contended again before parking.
	wakeup chan struct{}
}

const (
	unlocked  = 0
	locked    = 1
	contended = 2
)

// lockSpins is how many times Lock polls the state before parking. A
// critical section is a few hundred nanoseconds; the holder may be running
// on the other processor and release the lock within that. A variable only
// so that BenchmarkLockSpinBudget can draw the curve of throughput and tail
// against it; nothing else writes it.
var lockSpins = 64

// init makes the mutex usable; New calls it before the queue is shared.
func (m *bargingMutex) init() { m.wakeup = make(chan struct{}, 1) }

// Lock takes the lock, parking the goroutine while another holds it.
func (m *bargingMutex) Lock() {
	if m.state.CompareAndSwap(unlocked, locked) {
		return
	}
	m.lockSlow()
}

func (m *bargingMutex) lockSlow() {
	for range lockSpins {
		if m.state.Load() == unlocked && m.state.CompareAndSwap(unlocked, locked) {
			return
		}
	}
	// Taking the lock as contended is conservative: another goroutine may
	// be parked, and only an Unlock that sees contended wakes it.
	for m.state.Swap(contended) != unlocked {
		<-m.wakeup
	}
}

// Unlock releases the lock and wakes one parked goroutine, if any may be
// parked. It does not wait for that goroutine to run.
func (m *bargingMutex) Unlock() {
	if m.state.Swap(unlocked) == contended {
		select {
		case m.wakeup <- struct{}{}:
		default:
		}
	}
}
