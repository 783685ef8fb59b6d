//go:build linux && race

package candidates

// raceEnabled is true when the program is built with -race; the
// candidates are then built with -race too.
const raceEnabled = true
