package informer

import "fmt"

// Waiting for one handler, not only the cache.
//
// Informer.AfterRevision fires when the cache has a revision; the handlers
// are given the change later, each on its own goroutine. A controller that
// parks a key until its informer has the key's write, and also maps that
// write's change to the key through a handler, gets the key back twice if
// the callback wins the race with the handler: once from the callback, once
// from the change. Registration.AfterRevision orders the callback after the
// handler's calls instead, so the change queues the key first and the
// callback finds it queued.
//
// It works on the listener's counters: when the informer reaches the
// revision (under inf.mu, after the change was pushed to every listener),
// the waiter takes l.pushed as n; line is FIFO and coalescing merges into a
// slot already in line, so once taken >= n every change pushed until then
// has been delivered. (A late handler's replay, during which bulk would
// still grow ahead of line, is over by then: AddHandler returns after it,
// so a Registration exists only once it has ended.)

// deliveryWaiter is one Registration.AfterRevision callback whose revision
// the informer has reached, waiting for the handler to catch up. Fields
// other than f are guarded by the listener's mu.
type deliveryWaiter struct {
	f func()
	// n is l.pushed when the informer reached the revision.
	n uint64
	// done: f was started or is due to be, or stop was called first.
	done bool
}

// AfterRevision calls f once when the informer has reached revision rev
// (as in Informer.AfterRevision) and this handler has been given every
// change the informer had applied by then: its methods for those changes
// have returned. So a change to rev that the handler turns into work (a
// controller queueing a key) is handed to it before f runs.
//
// f runs on the handler's delivery goroutine, after those calls, or on a
// goroutine of its own if the handler had been given everything already
// when the informer reached rev. Like the handler's methods it must not
// block for long (it delays the handler's next change) and must not call
// Remove. A panic in f is recovered, logged and counted in Stats().Panics.
//
// f is never called once the handler is removed or Run has returned.
// stop cancels the callback: it reports true if f had not been started and
// now never will be, and false if f had already been started or stop had
// been called before. It does not wait for an f that is running.
//
// It panics if f is nil.
func (r *Registration[K, V]) AfterRevision(rev Revision, f func()) (stop func() bool) {
	if f == nil {
		panic(fmt.Sprintf("informer %q: Registration.AfterRevision: nil func", r.inf.name))
	}
	inf, l := r.inf, r.l
	dw := &deliveryWaiter{f: f}
	w := &revWaiter{rev: rev, index: -1}
	w.reached = func() { // under inf.mu, for writing, with the informer running
		if !l.waitDelivered(dw) {
			inf.fireLocked(&revWaiter{f: f})
		}
	}
	stopReach := inf.afterRevision(w)
	return func() bool {
		stopped := stopReach()
		l.mu.Lock()
		defer l.mu.Unlock()
		if stopped {
			dw.done = true // a second stop reports false
			return true
		}
		if dw.done {
			return false
		}
		dw.done = true // dueLocked drops it
		return true
	}
}

// waitDelivered queues dw until the handler has been given every change
// pushed so far, and reports true; or, if it has been already, marks dw
// done and reports false: the caller starts f. A halted listener queues
// nothing and reports true: f never runs.
func (l *listener[K, V]) waitDelivered(dw *deliveryWaiter) (queued bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case dw.done:
		return true // stopped as the informer reached the revision
	case l.stopped:
		return true
	case l.taken >= l.pushed:
		dw.done = true
		return false
	}
	dw.n = l.pushed
	l.delivered = append(l.delivered, dw)
	return true
}

// dueLocked removes and returns the callbacks whose changes have all been
// delivered. l.mu must be held.
func (l *listener[K, V]) dueLocked() []func() {
	if len(l.delivered) == 0 {
		return nil
	}
	var due []func()
	kept := l.delivered[:0]
	for _, dw := range l.delivered {
		switch {
		case dw.done:
		case l.taken >= dw.n:
			dw.done = true
			due = append(due, dw.f)
		default:
			kept = append(kept, dw)
		}
	}
	clear(l.delivered[len(kept):])
	l.delivered = kept
	return due
}

// callDue calls the due callbacks, without l.mu.
func (l *listener[K, V]) callDue(due []func()) {
	for _, f := range due {
		if err := protect("AfterRevision callback", f); err != nil {
			var zero K
			l.panicked(zero, err)
		}
	}
}
