package pgstore_test

import (
	"context"
	"errors"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/pglock"
)

// Widget is a row of the application's table widgets (id text primary
// key, replicas int), decoded from the row's JSON.
type Widget struct {
	Replicas int `json:"replicas"`
}

// An application's own table, written by anything with plain SQL, watched
// by an informer: Setup and Follow once at start-up (both idempotent and
// safe to run from every replica at once), then a TableSource per
// collection on the process's one DB.
func ExampleFollow() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	if err := pgstore.Setup(ctx, pool, ""); err != nil {
		log.Fatal(err)
	}
	if err := pgstore.Follow(ctx, pool, "", "public.widgets", "widgets"); err != nil {
		log.Fatal(err)
	}
	db, err := pgstore.NewDB(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	widgets, err := pgstore.NewTable[Widget](db, "widgets")
	if err != nil {
		log.Fatal(err)
	}
	inf, err := informer.New("widgets", widgets)
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = inf.Run(ctx) }()
	// psql: UPDATE widgets SET replicas = 3 WHERE id = 'w1' reaches inf's
	// handlers as an update of key "w1".
}

// A leader's writes fenced by its pglock term: a deposed leader's write is
// refused with ErrFenced, even one sent before it learnt that it lost the
// lease, because the check and the write share a transaction that holds
// the lease row against a takeover.
func ExampleStore_Fenced() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	db, err := pgstore.NewDB(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := pgstore.New[Widget](db, "widgets")
	if err != nil {
		log.Fatal(err)
	}
	lock := pglock.NewLock(pool, "widget-controller")
	e, err := leader.New(lock, leader.Config{
		Identity: "replica-1",
		OnStartedLeading: func(ctx context.Context) {
			term, _ := leader.TermFromContext(ctx)
			w := store.Fenced(pgstore.Fence{Name: "widget-controller", Term: term})
			// Typed writes: one statement each.
			_, err := w.Create(ctx, "w1", Widget{Replicas: 3})
			if errors.Is(err, pgstore.ErrFenced) {
				return // a newer term leads: stop
			}
			// Any SQL, e.g. a followed table, under the same fence.
			err = pgstore.Fence{Name: "widget-controller", Term: term}.Do(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `UPDATE widgets SET replicas = 3 WHERE id = 'w1'`)
				return err
			})
			if errors.Is(err, pgstore.ErrFenced) {
				return
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = e.Run(ctx)
}
