package reconcile

import (
	"cmp"
	"fmt"
	"reflect"
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

// badKeysOf lists up to n of c's bad keys, by key, and counts them all.
// The Manager holds informers of any key type behind Cache, so it reads
// (*informer.Informer[K, V]).BadKeys through reflection; a Cache without
// that method has none.
func badKeysOf(c Cache, n int) (lines []BadKeyLine, total int) {
	mv := reflect.ValueOf(c).MethodByName("BadKeys")
	if !mv.IsValid() || mv.Type().NumIn() != 0 || mv.Type().NumOut() != 1 || mv.Type().Out(0).Kind() != reflect.Slice {
		return nil, 0
	}
	list := mv.Call(nil)[0]
	for i := range list.Len() {
		if l, ok := badKeyLineOf(list.Index(i)); ok {
			lines = append(lines, l)
		}
	}
	slices.SortFunc(lines, func(a, b BadKeyLine) int { return cmp.Compare(a.Key, b.Key) })
	return lines[:min(n, len(lines))], len(lines)
}

// badKeyLineOf reads an informer.BadKey[K] of unknown K.
func badKeyLineOf(v reflect.Value) (BadKeyLine, bool) {
	if v.Kind() != reflect.Struct {
		return BadKeyLine{}, false
	}
	field := func(name string) any {
		if f := v.FieldByName(name); f.IsValid() && f.CanInterface() {
			return f.Interface()
		}
		return nil
	}
	var l BadKeyLine
	if k := field("Key"); k != nil {
		l.Key = fmt.Sprint(k)
	}
	l.Revision, _ = field("Revision").(informer.Revision)
	err, _ := field("Err").(error)
	l.Error, l.ErrorLen = errorText(err)
	l.Since, _ = field("Since").(time.Time)
	l.HasValue, _ = field("HasValue").(bool)
	return l, true
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
