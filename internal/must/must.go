// Package must unwraps the results of constructors in tests,
// where an error means the test itself is wrong. It is not for library code:
// there a constructor's error is returned to the caller (see
// docs/api-conventions.md).
package must

// Do returns v, or panics with err if err is not nil. It takes a
// constructor's two results directly: must.Do(memstore.New[string, int]()).
func Do[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
