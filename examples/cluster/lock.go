package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/reconcile"
)

// withLock sets mopts up for --lock: leader election through the store's
// own backend (etcd or PostgreSQL), standby on losing the lease, and the
// lease released on a clean shutdown so that the standby takes over at
// once. Without --lock it does nothing.
func withLock(mopts *reconcile.ManagerOptions, st *openedStores, cfg upConfig) error {
	if cfg.lock == "" {
		return nil
	}
	if st.lock == nil {
		return fmt.Errorf("--lock needs a store that the up processes share, and that fences a deposed leader's writes: --store etcd://… or postgres://…, not %q", cfg.store)
	}
	id := cfg.identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "-" + strconv.Itoa(os.Getpid())
	}
	mopts.Lock = st.lock
	mopts.Leader = leader.Config{Identity: id, ReleaseOnCancel: true}
	mopts.Standby = true
	return nil
}

// termFenced is a store whose writes made in a leader's context
// (leader.TermFromContext: the controllers' reconciles under a Manager with
// a Lock) are fenced by the leader's term: the store refuses them once a
// newer term has written, so that a deposed leader whose reconcile was
// still in flight cannot overwrite its successor's work. Other writes (the
// API's) are the store's own.
type termFenced[V any] struct {
	informer.Store[string, V]
	fenced func(term leader.Term) (informer.Store[string, V], error)
}

func (s termFenced[V]) writer(ctx context.Context) (informer.Store[string, V], error) {
	term, ok := leader.TermFromContext(ctx)
	if !ok {
		return s.Store, nil
	}
	return s.fenced(term)
}

func (s termFenced[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	w, err := s.writer(ctx)
	if err != nil {
		return 0, err
	}
	return w.Create(ctx, key, v)
}

func (s termFenced[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	w, err := s.writer(ctx)
	if err != nil {
		return 0, err
	}
	return w.Update(ctx, key, v, rev)
}

func (s termFenced[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	w, err := s.writer(ctx)
	if err != nil {
		return 0, err
	}
	return w.Delete(ctx, key, rev)
}

// etcdFenced fences st's leader writes with the term fence at fenceKey.
func etcdFenced[V any](st *etcdstore.Store[V], fenceKey string) informer.Store[string, V] {
	return termFenced[V]{Store: st, fenced: func(term leader.Term) (informer.Store[string, V], error) {
		fs, err := st.Fenced(etcdstore.TermFence(fenceKey, term))
		if err != nil {
			return nil, err
		}
		return fs, nil
	}}
}

// pgFenced fences st's leader writes with the lease row of lock name.
func pgFenced[V any](st *pgstore.Store[V], name string) informer.Store[string, V] {
	return termFenced[V]{Store: st, fenced: func(term leader.Term) (informer.Store[string, V], error) {
		return st.Fenced(pgstore.Fence{Name: name, Term: term}), nil
	}}
}
