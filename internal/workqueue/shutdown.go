package workqueue

// ShutDown makes the queue refuse new adds and makes Get return shutdown
// once no key is ready. Delayed keys that are not yet due are dropped. The
// queue's Metrics stay registered: a new queue reporting into them takes
// over (see NewMetrics). It does not wait for workers; it does wait for the
// timer goroutine to return.
// ShutDown interrupts a ShutDownWithDrain that is waiting. Calling it again
// does nothing more.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	q.drain = false
	wake(q.shutDownLocked())
	q.afterShutDown()
}

// ShutDownWithDrain is ShutDown that also waits until every key handed out
// by Get has been given back with Done. Keys added while processing are
// still handed out, so workers must keep calling Get until it reports
// shutdown, or the drain never ends.
func (q *Queue[K]) ShutDownWithDrain() {
	q.mu.Lock()
	q.drain = true
	wake(q.shutDownLocked())
	q.mu.Lock()
	for q.processing > 0 && q.drain {
		q.drained.Wait()
	}
	q.mu.Unlock()
	q.afterShutDown()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// shutDownLocked shuts down, once, and unlocks q.mu. It returns the
// parked Gets to wake: each gets a key that was already due, or shutdown.
func (q *Queue[K]) shutDownLocked() *waiter[K] {
	q.drained.Broadcast()
	if !q.shuttingDown {
		// Keys already due are ready, even if nothing has moved them yet.
		q.promoteIfDue()
		q.shuttingDown = true
		q.closed.Store(true)
		close(q.stop)
	}
	chain := q.handOff(q.metricsNow())
	if q.ready.n == 0 {
		chain = q.shutDownParked(chain)
	}
	q.mu.Unlock()
	return chain
}

// afterShutDown waits for the timer goroutine, which takes q.mu.
func (q *Queue[K]) afterShutDown() {
	q.mu.Lock()
	started := q.timerStarted
	q.mu.Unlock()
	if started {
		<-q.timerDone
	}
}
