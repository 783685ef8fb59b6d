//go:build linux && race

package chaos_test

// raceEnabled is true when the tests run with -race; the candidates are
// then built with -race too.
const raceEnabled = true
