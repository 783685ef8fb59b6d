package informer

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// badLogInterval is how often, at most, an informer logs more than one
// line about bad values: a mass break (a column's type changed under a
// million rows) makes every key bad at once, and a line per key would bury
// every other line of the log. BadKeys and the metrics stay exact.
const badLogInterval = 10 * time.Second

// badLogSamples is how many keys a summary line names.
const badLogSamples = 5

// badLog aggregates the lines about bad values: the first bad value after
// a quiet interval is logged at once, in full; the ones that follow within
// badLogInterval are counted, and one line at the end of the interval says
// how many there were, naming a few of their keys. It has its own lock, as
// the summary is written by the interval's goroutine.
type badLog struct {
	mu      sync.Mutex
	open    bool      // an interval is running: count, do not log
	since   time.Time // when it started, by the informer's clock
	gen     uint64    // counts the intervals started, for their goroutines
	count   int       // bad values counted in the interval
	samples []string  // the first badLogSamples of their keys
	err     error     // the first one's error
	// stop ends the interval's goroutine early, which closes done; nil
	// when no goroutine runs.
	stop, done chan struct{}
}

// note records one bad value of key, met at now, and reports whether it is
// to be logged now: true if no interval is running, or the one running is
// over by now (its summary is then returned, to be logged first, and its
// goroutine told to end); the caller then logs it and calls start. False
// if it was counted for the summary.
func (l *badLog) note(key any, err error, now time.Time) (logNow bool, s badSummary) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open && now.Sub(l.since) >= badLogInterval {
		// Over, though its goroutine has not ended it yet: end it here,
		// so that when a line is written does not depend on scheduling.
		s = badSummary{count: l.count, samples: l.samples, err: l.err}
		if l.stop != nil {
			close(l.stop)
		}
		l.open, l.count, l.samples, l.err, l.stop, l.done = false, 0, nil, nil, nil, nil
	}
	if !l.open {
		l.open, l.since = true, now
		return true, s
	}
	if l.count == 0 {
		l.err = err
	}
	l.count++
	if len(l.samples) < badLogSamples {
		l.samples = append(l.samples, fmt.Sprint(key))
	}
	return false, s
}

// badSummary is what an interval counted after its first bad value.
type badSummary struct {
	count   int
	samples []string
	err     error
}

// start runs the interval that note opened, on clk, and calls flush at
// its end unless take ends it first.
func (l *badLog) start(clk clock.WithTicker, flush func(gen uint64)) {
	t := clk.NewTimer(badLogInterval)
	stop, done := make(chan struct{}), make(chan struct{})
	l.mu.Lock()
	l.gen++
	gen := l.gen
	l.stop, l.done = stop, done
	l.mu.Unlock()
	go func() {
		defer close(done)
		defer t.Stop()
		select {
		case <-t.C():
			flush(gen)
		case <-stop:
		}
	}()
}

// take ends the interval and returns what it counted, and how to end its
// goroutine (nil channels if there is none left to end). With gen above 0
// it does so only if the interval running is the gen'th, so that a
// goroutine whose interval note ended already cannot end the next one.
func (l *badLog) take(gen uint64) (s badSummary, stop, done chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != 0 && gen != l.gen {
		return badSummary{}, nil, nil
	}
	s, stop, done = badSummary{count: l.count, samples: l.samples, err: l.err}, l.stop, l.done
	l.open, l.count, l.samples, l.err, l.stop, l.done = false, 0, nil, nil, nil, nil
	return s, stop, done
}

// logBadLocked counts a bad value of key at rev for the log, logging it
// at once if it is the first in an interval. inf.mu must be held.
func (inf *Informer[K, V]) logBadLocked(key K, rev Revision, err error, hasValue bool) {
	r, isPanic := errors.AsType[*recovered](err)
	// Only while Run runs: stopBadLog, after Run's end, ends the interval.
	aggregate := inf.state == running
	var logNow bool
	if aggregate {
		var prev badSummary
		logNow, prev = inf.badLog.note(key, err, inf.clock.Now())
		inf.logBadSummary(prev.count, prev.samples, prev.err)
	}
	if aggregate && !logNow {
		if isPanic {
			inf.stats.panics.Add(1) // what panicked would have counted
		}
		return
	}
	if isPanic {
		// A panic in the user's code: logged at Error with its stack.
		inf.panicked(r, key, rev, "the key is bad: the cache keeps its last good value, if any")
	} else {
		inf.log.Warn("value cannot be decoded: the key is bad until a later value of it can, and the cache keeps its last good value, if any",
			"key", key, "revision", rev, "error", err, "has_value", hasValue)
	}
	if aggregate {
		inf.badLog.start(inf.clock, inf.flushBadLog)
	}
}

// flushBadLog ends the bad-value log's interval and writes its summary, if
// it counted anything. The interval's goroutine calls it.
func (inf *Informer[K, V]) flushBadLog(gen uint64) {
	s, _, _ := inf.badLog.take(gen)
	inf.logBadSummary(s.count, s.samples, s.err)
}

// stopBadLog ends the bad-value log's interval early, when Run returns, so
// that its summary is written and its goroutine gone before Run returns.
func (inf *Informer[K, V]) stopBadLog() {
	s, stop, done := inf.badLog.take(0)
	if stop != nil {
		close(stop)
		<-done
	}
	inf.logBadSummary(s.count, s.samples, s.err)
}

// logBadSummary writes the line about the count bad values of an interval
// after its first.
func (inf *Informer[K, V]) logBadSummary(count int, samples []string, err error) {
	if count == 0 {
		return
	}
	inf.log.Warn("more values cannot be decoded (or their transform panicked) since the last such line: their keys are bad until later values of them can be taken; Informer.BadKeys lists them all",
		"count", count, "sample_keys", samples, "first_error", err, "bad_keys_now", inf.stats.badKeys.Load())
}
