package workqueue

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

// keyCheck is how much checking keys of a type need.
type keyCheck uint8

const (
	// keyCheckNone: every value equals itself and hashes (strings,
	// integers, pointers, and structs and arrays of them).
	keyCheckNone keyCheck = iota
	// keyCheckNaN: a value can hold a NaN, and comparing cannot panic.
	keyCheckNaN
	// keyCheckAll: a value can hold an interface, whose dynamic value may
	// be uncomparable: comparing it panics.
	keyCheckAll
)

// keyCheckFor returns the check values of t need.
func keyCheckFor(t reflect.Type) keyCheck {
	switch t.Kind() {
	case reflect.Interface:
		return keyCheckAll
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return keyCheckNaN
	case reflect.Array:
		return keyCheckFor(t.Elem())
	case reflect.Struct:
		c := keyCheckNone
		for i := range t.NumField() {
			c = max(c, keyCheckFor(t.Field(i).Type))
		}
		return c
	}
	return keyCheckNone
}

// checkKey panics if key cannot be a queue key, which takes c to find out.
func checkKey[K comparable](c keyCheck, key K) {
	if c == keyCheckNaN {
		if key != key {
			panic(notEqual(key))
		}
		return
	}
	equal, err := selfEqual(key)
	if err != nil {
		panic(fmt.Sprintf("queue: key %v of type %T cannot be compared or hashed, so it cannot be a queue key: %v", key, key, err))
	}
	if !equal {
		panic(notEqual(key))
	}
}

func notEqual(key any) string {
	return fmt.Sprintf("queue: key %v is not equal to itself (it is or holds a NaN), so the queue could never find it again; use keys without NaN", key)
}

// usable reports whether key can be a queue key, without panicking.
func usable[K comparable](c keyCheck, key K) bool {
	if c == keyCheckNaN {
		return key == key
	}
	equal, err := selfEqual(key)
	return err == nil && equal
}

// selfEqual reports key == key, and the runtime's panic if the comparison
// panics (an interface holding an uncomparable value).
func selfEqual[K comparable](key K) (equal bool, err any) {
	defer func() { err = recover() }()
	return key == key, nil
}
