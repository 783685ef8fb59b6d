package reconcile

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// badKeyLine renders an informer.BadKey of any key type.
func badKeyLine[K comparable](b informer.BadKey[K]) debugpage.BadKeyLine {
	l := debugpage.BadKeyLine{Key: fmt.Sprint(b.Key), Revision: b.Revision, Since: b.Since, HasValue: b.HasValue}
	l.Error, l.ErrorLen = debugpage.ErrorText(b.Err)
	return l
}

// badKeysOf lists up to n of c's bad keys, by key, and counts them all;
// a Cache that is not an informer has none.
func badKeysOf(c Cache, n int) (lines []debugpage.BadKeyLine, total int) {
	s, ok := c.(informerStats)
	if !ok {
		return nil, 0
	}
	for _, b := range s.AnyBadKeys() {
		lines = append(lines, badKeyLine(b))
	}
	slices.SortFunc(lines, func(a, b debugpage.BadKeyLine) int { return cmp.Compare(a.Key, b.Key) })
	return lines[:min(n, len(lines))], len(lines)
}

// primaryBadKey is a For watch's bad state of key, if the informer marks
// it bad.
func (w *informerWatch[K, WK, WV]) primaryBadKey(key K) (debugpage.BadKeyLine, bool) {
	k, ok := any(key).(WK)
	if !ok {
		return debugpage.BadKeyLine{}, false
	}
	b, bad := w.inf.BadKey(k)
	if !bad {
		return debugpage.BadKeyLine{}, false
	}
	return badKeyLine(b), true
}

// badKey returns key's bad state in the controller's For informer.
func (c *Controller[K]) badKey(key K) (debugpage.BadKeyLine, bool) {
	for _, w := range c.watches {
		if p, ok := w.(interface {
			primaryBadKey(K) (debugpage.BadKeyLine, bool)
			primary() bool
		}); ok && p.primary() {
			return p.primaryBadKey(key)
		}
	}
	return debugpage.BadKeyLine{}, false
}
