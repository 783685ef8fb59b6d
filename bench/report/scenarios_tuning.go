package main

// The rows of the performance targets that the numbered scenarios above do not
// carry (18-21): the queue's paired throughput, the etcd Source's initial
// sync against its floor, the update burst and the controller over etcd.
// Declared in a file whose
// name sorts after scenarios_stores.go, so that its init runs last and its
// rows follow the backend rows.
func init() {
	Scenarios = append(Scenarios, []Scenario{
		{"ThroughputPairs/plain", "18. throughput, 8 producers / 8 workers, 1M keys: converge ÷ client-go, one pair run back to back per rep", srcNone},
		{"ThroughputPairs/metrics", "18. the same, metrics on", srcNone},
		{"EtcdInitialSync", "19. etcdstore initial sync of 100k objects (~550 B) vs its floor (one Get + decode on 2 goroutines), alternating", srcEtcd},
		{"ReconcileBurst", "20. update burst: 200k updates over 10k keys, 4 workers; client-go's Source: a 1024-slot fake watch channel", srcMemstore + " (Puts)"},
		{"ReconcileBurst/converge-chan", "20. diagnostic, no target: converge reading the same 1024-slot channel as client-go, one emit per object", "diagnostic: a plain channel Source"},
		{"ReconcileThroughputEtcd", "21. controller: 100k objects listed and each reconciled once, 4 workers; client-go's Source: its in-memory fake ListWatch; no target", srcEtcd + ": one Get, JSON decode"},
	}...)
	for _, v := range []string{"plain", "metrics"} {
		Targets[Key{"ThroughputPairs/" + v, "median-ratio"}] = Target{"≥ 2 in every rep", []check{vs("", ">=", 2).inEveryRep()}}
	}
	Targets[Key{"EtcdInitialSync", "etcdstore/floor"}] = Target{"≤ 1.1", []check{vs("", "<=", 1.1)}}
	Targets[Key{"ReconcileBurst", "drain-ms"}] = Target{"≤ 0.5x client-go (drain ≥ 2x faster)", []check{vs(clientGo, "<=", 0.5)}}
}
