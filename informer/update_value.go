package informer

import (
	"reflect"

	"github.com/converge-go/converge/object"
)

// What the update helpers need from a value type, found by type assertions
// on a *V: the method set of *V includes V's value-receiver methods, so one
// assertion on the pointer finds a method declared on either receiver. The
// runtime caches each assertion's result per type, so there is nothing to
// gain from caching it here (BenchmarkUpdate in the bench module measures
// the helper against a hand-written loop). copyValue asks a nil *V, so
// that the value read does not escape to the heap for types without
// DeepCopy (escape analysis does not look at which branch runs).

// deepCopier is deepcopy-gen's value form, on V or *V.
type deepCopier[V any] interface{ DeepCopy() V }

// deepCopierPtr is deepcopy-gen's usual form: func (in *T) DeepCopy() *T.
type deepCopierPtr[V any] interface{ DeepCopy() *V }

// equaler is an Equal method on V or *V.
type equaler[V any] interface{ Equal(V) bool }

// isPointer reports whether V is a pointer type, for which a copy must
// copy the pointee and the interfaces above are looked for on V itself.
func isPointer[V any]() bool { return reflect.TypeFor[V]().Kind() == reflect.Pointer }

// copyValue returns the copy Update's mutate works on: the value's
// DeepCopy if it has one, else a shallow copy (of the pointee, if V is a
// non-nil pointer, so that mutate cannot write into the shared value).
func copyValue[V any](p *V) V {
	switch any((*V)(nil)).(type) {
	case deepCopierPtr[V]:
		q := new(V) // so that p does not escape
		*q = *p
		if d := any(q).(deepCopierPtr[V]).DeepCopy(); d != nil {
			return *d
		}
		var zero V
		return zero
	case deepCopier[V]:
		q := new(V)
		*q = *p
		return any(q).(deepCopier[V]).DeepCopy()
	}
	if !isPointer[V]() {
		return *p
	}
	// V is *T: T's methods are V's, and the copy is a new T.
	if c, ok := any(*p).(deepCopier[V]); ok {
		return c.DeepCopy()
	}
	rv := reflect.ValueOf(*p) // a *T
	if rv.IsNil() {
		return *p
	}
	cp := reflect.New(rv.Type().Elem())
	cp.Elem().Set(rv.Elem())
	return cp.Interface().(V)
}

// equalValues reports whether mutate left the value as read: by V's Equal
// method if it has one (asked of the new value), else reflect.DeepEqual.
func equalValues[V any](old, next *V) bool {
	if e, ok := as[equaler[V]](next); ok {
		return e.Equal(*old)
	}
	return reflect.DeepEqual(*old, *next)
}

// as returns the value as an I: p, if *V implements I, else *p, if V is a
// non-nil pointer that does; false if neither.
func as[I, V any](p *V) (I, bool) {
	if o, ok := any(p).(I); ok {
		return o, true
	}
	if isPointer[V]() {
		if o, ok := any(*p).(I); ok && !reflect.ValueOf(*p).IsNil() {
			return o, true
		}
	}
	var zero I
	return zero, false
}

// metaOf returns the value's object.Meta if *V (or V, a non-nil pointer)
// implements object.Object, else nil.
func metaOf[V any](p *V) *object.Meta {
	if o, ok := as[object.Object](p); ok {
		return o.ObjectMeta()
	}
	return nil
}

// isSpecObject reports whether the helpers keep V's Generation: whether
// *V, or V if it is a pointer, implements object.SpecObject. It asks nil
// values, so that nothing escapes.
func isSpecObject[V any]() bool {
	if _, ok := any((*V)(nil)).(object.SpecObject); ok {
		return true
	}
	if !isPointer[V]() {
		return false
	}
	var zero V // a nil *T, whose method set is *T's
	_, ok := any(zero).(object.SpecObject)
	return ok
}

// specObjectOf returns the value as an object.SpecObject, or nil if it is
// not one (or is a nil pointer).
func specObjectOf[V any](p *V) object.SpecObject {
	o, _ := as[object.SpecObject](p)
	return o
}

// keepGeneration sets the Generation of next, mutate's result from cur, as
// object.SpecObject documents: cur's, plus 1 if the spec changed. It does
// nothing for other values.
func keepGeneration[V any](cur, next *V) {
	if !isSpecObject[V]() {
		return
	}
	c := new(V) // so that cur does not escape to the heap
	*c = *cur
	co, no := specObjectOf(c), specObjectOf(next)
	if co == nil || no == nil {
		return
	}
	gen := co.ObjectMeta().Generation
	if !reflect.DeepEqual(co.ObjectSpec(), no.ObjectSpec()) {
		gen++
	}
	no.ObjectMeta().Generation = gen
}

// createdGeneration sets the Generation of a value about to be created:
// 1 for an object.SpecObject, as the API server does.
func createdGeneration[V any](next *V) {
	if !isSpecObject[V]() {
		return
	}
	if o := specObjectOf(next); o != nil {
		o.ObjectMeta().Generation = 1
	}
}
