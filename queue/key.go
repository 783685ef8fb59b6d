package queue

import (
	"fmt"
	"reflect"
)

// Keys the queue cannot hold.
//
// The index finds a key by hashing it and comparing it with ==. A key that
// is not equal to itself (a NaN, or a struct, array or interface holding one)
// is never found again: every Add makes a new entry, Done never finds the key
// Get handed out, and ShutDownWithDrain waits for ever. An interface key
// holding a slice, map or func cannot be hashed or compared at all, and
// would panic deep inside the index with the runtime's message. Both are
// refused at Add with a panic that names the problem, so the caller's
// recovery (a controller's delivery path) can log something useful.
//
// Only key types that can hold such values (floats, complex numbers and
// interfaces, directly or inside structs and arrays) pay for the check;
// for string and integer keys it is one predictable branch.

// keyNeedsCheck reports whether values of t can be unequal to themselves
// or unhashable.
func keyNeedsCheck(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.Interface:
		return true
	case reflect.Array:
		return keyNeedsCheck(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if keyNeedsCheck(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// checkKey panics if key cannot be a queue key.
func checkKey[K comparable](key K) {
	equal, err := selfEqual(key)
	if err != nil {
		panic(fmt.Sprintf("queue: key %v of type %T cannot be compared or hashed, so it cannot be a queue key: %v", key, key, err))
	}
	if !equal {
		panic(fmt.Sprintf("queue: key %v is not equal to itself (it is or holds a NaN), so the queue could never find it again; use keys without NaN", key))
	}
}

// selfEqual reports key == key, and the runtime's panic if the comparison
// panics (an interface holding an uncomparable value).
func selfEqual[K comparable](key K) (equal bool, err any) {
	defer func() { err = recover() }()
	return key == key, nil
}
