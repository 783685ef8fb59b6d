//go:build linux && !race

package candidates

const raceEnabled = false
