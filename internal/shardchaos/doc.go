// Package shardchaos holds the sharding tests with real processes and a
// real etcd and PostgreSQL; its only code is the log's Entry. Its test builds
// internal/shardchaos/replica (a reconcile.Manager with a Sharder over
// etcdlock.Locks or pglock.Locks and a sharded controller whose reconciles append fenced
// entries to a log in the same backend, see its doc), runs 4 to 6 of them with the
// chaos harness (internal/chaos/candidates), joins, stops gracefully,
// SIGKILLs and SIGSTOPs/SIGCONTs them, and checks the log: the accepted
// reconciles of one key never overlap in time, a bucket's accepted entries
// never go back to an older epoch, and after the last membership change
// every key is reconciled again within a bound. It logs the time each
// rebalance took and how many buckets moved.
//
//	scripts/servers.sh start; eval "$(scripts/servers.sh env)"
//	CONVERGE_INTEGRATION=1 go test -race -count=1 ./internal/shardchaos/
package shardchaos
