package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/converge-go/converge/informer"
)

// BadKeysShown is how many bad keys the overview lists per informer.
const BadKeysShown = 20

// BadKeyLine is a key whose latest value its informer could not take (a
// value its Source could not decode, or the transform panicked on): see
// informer.BadKey. The informer keeps the key's last good value, if any,
// and every other key flows.
type BadKeyLine struct {
	// Key is the key, rendered with fmt.Sprint.
	Key string
	// Revision is the revision of the value that could not be taken.
	Revision informer.Revision
	// Error says why, truncated to MaxErrorBytes; ErrorLen is its full
	// length.
	Error    string
	ErrorLen int
	// Since is when the key became bad, by the informer's clock.
	Since time.Time
	// HasValue says that the cache still holds an earlier, good value.
	HasValue bool
}

// badKeyLine renders an informer.BadKey of any key type.
func badKeyLine[K comparable](b informer.BadKey[K]) BadKeyLine {
	l := BadKeyLine{Key: fmt.Sprint(b.Key), Revision: b.Revision, Since: b.Since, HasValue: b.HasValue}
	l.Error, l.ErrorLen = errorText(b.Err)
	return l
}

// badKeysOf lists up to n of c's bad keys, by key, and counts them all;
// a Cache that is not an informer has none.
func badKeysOf(c Cache, n int) (lines []BadKeyLine, total int) {
	s, ok := c.(informerStats)
	if !ok {
		return nil, 0
	}
	for _, b := range s.AnyBadKeys() {
		lines = append(lines, badKeyLine(b))
	}
	slices.SortFunc(lines, func(a, b BadKeyLine) int { return cmp.Compare(a.Key, b.Key) })
	return lines[:min(n, len(lines))], len(lines)
}

// primaryBadKey is a For watch's bad state of key, if the informer marks
// it bad.
func (w *informerWatch[K, WK, WV]) primaryBadKey(key K) (BadKeyLine, bool) {
	k, ok := any(key).(WK)
	if !ok {
		return BadKeyLine{}, false
	}
	b, bad := w.inf.BadKey(k)
	if !bad {
		return BadKeyLine{}, false
	}
	return badKeyLine(b), true
}

// badKey returns key's bad state in the controller's For informer.
func (c *Controller[K]) badKey(key K) (BadKeyLine, bool) {
	for _, w := range c.watches {
		if p, ok := w.(interface {
			primaryBadKey(K) (BadKeyLine, bool)
			primary() bool
		}); ok && p.primary() {
			return p.primaryBadKey(key)
		}
	}
	return BadKeyLine{}, false
}
