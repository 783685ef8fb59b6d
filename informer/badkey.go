package informer

import "time"

// BadKey is a key whose latest value in the store could not be taken into
// the cache: its Source could not decode it (Entry.Err, Event.Err) or the
// transform (WithTransform) panicked on it. The cache keeps the key's last
// good value, if it had one, and every other key flows as usual; the key
// stops being bad as soon as a later revision of it is taken, or it is
// deleted.
type BadKey[K comparable] struct {
	Key K
	// Revision is the revision of the value that could not be taken.
	Revision Revision
	// Err says why.
	Err error
	// Since is when, by the informer's clock, the key became bad: the
	// first bad revision of a run of them.
	Since time.Time
	// HasValue reports whether the cache still holds an earlier, good
	// value of the key.
	HasValue bool
}

// BadKeys returns the keys that are bad now, in no particular order.
func (inf *Informer[K, V]) BadKeys() []BadKey[K] {
	return nil
}

// BadKey returns key's bad state, and false if the key is not bad.
func (inf *Informer[K, V]) BadKey(key K) (BadKey[K], bool) {
	return BadKey[K]{}, false
}
