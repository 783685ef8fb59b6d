package informer

import "time"

// BadKey is a key whose latest value in the store could not be taken into
// the cache: its Source could not decode it (Entry.Err, Event.Err) or the
// transform (WithTransform) panicked on it. The cache keeps the key's last
// good value, if it had one (Get, List and the indexes return it, and
// Entry.Revision is the bad value's revision), or has no entry for the key
// if it never had one; every other key flows as usual.
//
// The handlers are not called for a bad value: there is no new value to
// give them, and the last good one is what they were given already. A key
// stops being bad when a later revision of it is taken (the handlers are
// then given that value, as an update from the last good one or as an add
// if there was none), when it is deleted (a key with a good value is
// deleted as usual, carrying that value; one without is dropped without a
// call), or when a list no longer has it. Nothing is ever deleted because
// a value is bad: a list that has the key with Err keeps it.
//
// A bad value is logged at Warn (a panic of the transform at Error), but
// many keys going bad at once (a column's type changed under every row) do
// not make a line each: after the first, the informer counts them and
// logs, at most once every 10 seconds by its clock (WithClock) and when
// Run returns, one line with their number and a few of their keys.
// BadKeys and Stats stay exact.
type BadKey[K comparable] struct {
	Key K
	// Revision is the revision of the value that could not be taken: the
	// Put's, or for a listed entry its Entry.Revision, or the list's if
	// the Source gave none.
	Revision Revision
	// Err says why: the Source's error, or the transform's panic.
	Err error
	// Since is when, by the informer's clock, the key became bad: the
	// first bad revision of a run of them.
	Since time.Time
	// HasValue reports whether the cache still holds an earlier, good
	// value of the key.
	HasValue bool
}

// BadKeys returns the keys that are bad now, in no particular order; none
// (nil) normally. Stats().BadKeys is their number.
func (inf *Informer[K, V]) BadKeys() []BadKey[K] {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	if len(inf.bad) == 0 {
		return nil
	}
	out := make([]BadKey[K], 0, len(inf.bad))
	for _, b := range inf.bad {
		out = append(out, b)
	}
	return out
}

// AnyBadKeys is BadKeys with each key as an any, for code that holds
// informers of several key types behind one interface (a Manager's
// metrics and debug pages).
func (inf *Informer[K, V]) AnyBadKeys() []BadKey[any] {
	bad := inf.BadKeys()
	if len(bad) == 0 {
		return nil
	}
	out := make([]BadKey[any], len(bad))
	for i, b := range bad {
		out[i] = BadKey[any]{Key: b.Key, Revision: b.Revision, Err: b.Err, Since: b.Since, HasValue: b.HasValue}
	}
	return out
}

// BadKey returns key's bad state, and false if the key is not bad.
func (inf *Informer[K, V]) BadKey(key K) (BadKey[K], bool) {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	b, ok := inf.bad[key]
	return b, ok
}

// takeLocked returns the value to cache for key's value at rev, which the
// Source gave with srcErr: the value, ingested (transformed), and true; or,
// if the Source could not decode it or the transform panicked, false, with
// the key marked bad (see markBadLocked for sameIfErrEqual). inf.mu must be
// held for writing.
func (inf *Informer[K, V]) takeLocked(key K, value V, srcErr error, rev Revision, sameIfErrEqual bool) (V, bool) {
	err := srcErr
	var v V
	if err == nil {
		v, err = inf.ingest(value)
	}
	if err != nil {
		inf.markBadLocked(key, rev, err, sameIfErrEqual)
		return v, false
	}
	return v, true
}

// markBadLocked records that key's value at rev could not be taken, for
// err, and moves the key's cached revision to rev if it has a value, so
// that a re-sent event at rev is a duplicate. It counts a bad value once
// per key and revision (a relist that finds the same bad value says
// nothing new), and logs it, or counts it for the next summary line if
// many keys go bad at once (see logBadLocked). sameIfErrEqual is for a listed entry that did not say
// its revision (so rev is the list's): the key's bad value is taken to be
// the same if the error says the same. inf.mu must be held for writing.
func (inf *Informer[K, V]) markBadLocked(key K, rev Revision, err error, sameIfErrEqual bool) {
	_, hasValue := inf.cache.get(key)
	if hasValue {
		inf.cache.setRev(key, rev)
	}
	prev, wasBad := inf.bad[key]
	if wasBad && (prev.Revision == rev || sameIfErrEqual && prev.Err.Error() == err.Error()) {
		prev.Revision, prev.HasValue = rev, hasValue
		inf.bad[key] = prev
		return
	}
	since := inf.clock.Now()
	if wasBad {
		since = prev.Since
	}
	if inf.bad == nil {
		inf.bad = make(map[K]BadKey[K])
	}
	inf.bad[key] = BadKey[K]{Key: key, Revision: rev, Err: err, Since: since, HasValue: hasValue}
	inf.stats.badKeys.Store(uint64(len(inf.bad)))
	inf.stats.decodeErrors.Add(1)
	inf.logBadLocked(key, rev, err, hasValue)
}

// clearBadLocked ends key's bad state, if it has one. It costs a length
// check when no key is bad. inf.mu must be held for writing.
func (inf *Informer[K, V]) clearBadLocked(key K) {
	if len(inf.bad) == 0 {
		return
	}
	if _, ok := inf.bad[key]; ok {
		delete(inf.bad, key)
		inf.stats.badKeys.Store(uint64(len(inf.bad)))
	}
}

// keepListedBadLocked ends the bad state of every bad key that entries, a
// full list, does not have. inf.mu must be held for writing.
func (inf *Informer[K, V]) keepListedBadLocked(entries []Entry[K, V]) {
	if len(inf.bad) == 0 {
		return
	}
	listed := make(map[K]struct{}, len(inf.bad))
	for _, e := range entries {
		if _, ok := inf.bad[e.Key]; ok {
			listed[e.Key] = struct{}{}
		}
	}
	for k := range inf.bad {
		if _, ok := listed[k]; !ok {
			delete(inf.bad, k)
		}
	}
	inf.stats.badKeys.Store(uint64(len(inf.bad)))
}

// listedRev is the revision the cache holds for an entry of a list at
// rev: the entry's own, if the Source gave one that can be right.
func listedRev[K comparable, V any](e Entry[K, V], rev Revision) Revision {
	if e.Revision == 0 || e.Revision > rev {
		return rev
	}
	return e.Revision
}
