package api

import (
	"errors"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// NewMemoryStores returns a Stores of empty in-memory stores: the control
// plane's default, and what tests run the controllers on. The options are
// given to every store.
func NewMemoryStores(opts ...memstore.Option) (Stores, error) {
	var errs []error
	s := Stores{
		Deployments: newMemory[Deployment](&errs, opts),
		ReplicaSets: newMemory[ReplicaSet](&errs, opts),
		Pods:        newMemory[Pod](&errs, opts),
		Nodes:       newMemory[Node](&errs, opts),
		Leases:      newMemory[Lease](&errs, opts),
		Events:      newMemory[events.Event](&errs, opts),
	}
	return s, errors.Join(errs...)
}

func newMemory[V any](errs *[]error, opts []memstore.Option) informer.Store[string, V] {
	s, err := memstore.New[string, V](opts...)
	*errs = append(*errs, err)
	return s
}

// NewInformers returns an informer per kind over s, named after the kind.
// Run them (a reconcile.Manager runs the informers of the controllers it is
// given) before reading their caches.
func NewInformers(s Stores, opts ...informer.Option) (Informers, error) {
	var errs []error
	i := Informers{
		Deployments: newInformer(&errs, "deployments", s.Deployments, opts),
		ReplicaSets: newInformer(&errs, "replicasets", s.ReplicaSets, opts),
		Pods:        newInformer(&errs, "pods", s.Pods, opts),
		Nodes:       newInformer(&errs, "nodes", s.Nodes, opts),
		Leases:      newInformer(&errs, "leases", s.Leases, opts),
	}
	return i, errors.Join(errs...)
}

func newInformer[V any](errs *[]error, name string, src informer.Source[string, V], opts []informer.Option) *informer.Informer[string, V] {
	inf, err := informer.New(name, src, opts...)
	*errs = append(*errs, err)
	return inf
}
