package main

// The backend rows (scenarios 13-17): PostgreSQL (informer/pgstore)
// beside its floors and beside etcd (informer/etcdstore), each row
// converge's alone (the benchmarks name no other implementation: parse.go's
// splitName). Declared in a file named after scenarios_reconcile.go, so that
// its init runs after that one's and the rows follow the controller rows.
func init() {
	Scenarios = append(Scenarios, []Scenario{
		{"PgstoreInitialSync", "13. initial sync of 100k objects (~550 B): one SELECT + decode (floor), pgstore, etcdstore, alternating", "pgstore (PostgreSQL), etcdstore (etcd)"},
		{"PgstoreWrite", "14. CAS writes, 8 writers: pgstore's Store.Update vs a raw single-row INSERT … ON CONFLICT (floor), alternating", srcPg},
		{"PgstoreTableWrite", "14. the trigger path's cost: single-row upserts, 8 writers, into a user's table followed by pgstore (with and without NOTIFY) vs the same table not followed (floor), alternating", srcPg},
		{"PgstoreWriteToInformer/raw", "15. the write alone: a raw single-row INSERT at 1k writes/s, 8 writers, no informer (the floor)", "none (PostgreSQL INSERT alone)"},
		{"PgstoreWriteToInformer/local", "15. write → informer handler at 1k writes/s, 8 writers, pgstore, writers in the informer's process", srcPg},
		{"PgstoreWriteToInformer/notify", "15. write → informer handler at 1k writes/s, 8 writers, pgstore, writers in another process (NOTIFY)", srcPg},
		{"EtcdWriteToInformer", "15. write → informer handler at 1k writes/s, 8 writers, etcdstore", srcEtcd},
		{"PgstoreTableToInformer", "15. plain SQL INSERT into a followed table (as psql) → informer handler at 500 writes/s, 8 writers", "pgstore (PostgreSQL): a followed table, NOTIFY from its trigger"},
		{"PgstoreWriteToInformer10k/local", "16. write → informer handler at 10k writes/s asked, 8 writers, pgstore, writers in the informer's process", srcPg},
		{"PgstoreWriteToInformer10k/notify", "16. write → informer handler at 10k writes/s asked, 8 writers, pgstore, writers in another process (NOTIFY)", srcPg},
		{"EtcdWriteToInformer10k", "16. write → informer handler at 10k writes/s asked, 8 writers, etcdstore", srcEtcd},
		{"PgstoreHoleStall/commit", "17. pgstore: a transaction holding a revision open 1 s, then committing, under 1k writes/s", srcPg},
		{"PgstoreHoleStall/rollback", "17. pgstore: a transaction holding a revision open 1 s, then rolling back, under 1k writes/s", srcPg},
	}...)
	Targets[Key{"PgstoreInitialSync", "pgstore/floor"}] = Target{"≤ 1.3", []check{vs("", "<=", 1.3)}}
	Targets[Key{"PgstoreInitialSync", "pgstore/etcdstore"}] = Target{"< 1 (faster than etcd)", []check{vs("", "<", 1)}}
	Targets[Key{"PgstoreWrite", "typed/raw"}] = Target{"≥ 0.5", []check{vs("", ">=", 0.5)}}
	for _, path := range []string{"local", "notify"} {
		Targets[Key{"PgstoreWriteToInformer/" + path, "p99-ms"}] = Target{"≤ 5 ms", []check{vs("", "<=", 5)}}
	}
	Targets[Key{"PgstoreTableToInformer", "p99-ms"}] = Target{"≤ 5 ms", []check{vs("", "<=", 5)}}
}
