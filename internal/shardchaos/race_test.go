//go:build race

package shardchaos_test

const raceEnabled = true
