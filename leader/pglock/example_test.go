package pglock_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/pglock"
	"github.com/converge-go/converge/leader/shard"
)

// One leader among the processes that share a row of the lease table.
// EnsureSchema creates the table once (or let a migration create it);
// then every process runs an elector on the same lock name. It needs a
// PostgreSQL server, so it is compiled but not run.
func ExampleNewLock() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	lock := pglock.NewLock(pool, "report-writer")
	if err := lock.EnsureSchema(ctx); err != nil {
		log.Fatal(err)
	}
	host, _ := os.Hostname()
	e, err := leader.New(lock, leader.Config{
		Identity:        host, // unique per process
		ReleaseOnCancel: true,
		OnStartedLeading: func(ctx context.Context) {
			term, _ := leader.TermFromContext(ctx)
			log.Println("leading in term", term) // pgstore.Fence{Name: "report-writer", Term: term} fences writes
			<-ctx.Done()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Locks in one table are a shard.Backend: each replica holds some of the
// buckets, each bucket's lease one row.
func ExampleNewLocks() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks := pglock.NewLocks(pool)
	if err := locks.EnsureSchema(ctx); err != nil {
		log.Fatal(err)
	}
	host, _ := os.Hostname()
	s, err := shard.New(locks, shard.Config{Name: "reports", Identity: host})
	if err != nil {
		log.Fatal(err)
	}
	_ = s.Add(shard.HandlerFunc(func(stop, lease context.Context, b shard.Bucket) {
		<-stop.Done() // work on the keys of bucket b.ID until it moves away
	}))
	if err := s.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
