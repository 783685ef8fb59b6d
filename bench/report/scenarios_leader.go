package main

import "fmt"

// The leader fail-over rows (scenario 10, BenchmarkLeaderFailover in
// package bench): one per backend, fault and timing. In-process electors
// (memory: converge's memory lock, client-go's LeaseLock on a fake
// clientset) crash; candidate processes (etcd, postgres) are killed.
// Declared in a file of their own, after parse.go's init, so that they
// follow the informer rows.
func init() {
	timings := []struct{ name, text string }{{"default", "15s/10s/2s"}, {"short", "2s/1.4s/200ms"}}
	faults := []struct{ name, text string }{
		{"crash", "crash (no release)"},
		{"kill", "SIGKILL"},
		{"release", "release (ReleaseOnCancel)"},
	}
	for _, backend := range []string{"memory", "etcd", "postgres"} {
		for _, f := range faults {
			for _, tm := range timings {
				Scenarios = append(Scenarios, Scenario{
					fmt.Sprintf("LeaderFailover/%s/%s/%s", backend, f.name, tm.name),
					fmt.Sprintf("10. leader fail-over after %s, %s, %s", f.text, backend, tm.text),
					"none (lock: " + backend + ")",
				})
			}
		}
	}
}
