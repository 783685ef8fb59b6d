package api

import (
	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// NewMemoryStores returns a Stores of empty in-memory stores: the control
// plane's default, and what tests run the controllers on.
func NewMemoryStores() Stores {
	return Stores{
		Deployments: memstore.New[string, Deployment](),
		ReplicaSets: memstore.New[string, ReplicaSet](),
		Pods:        memstore.New[string, Pod](),
		Nodes:       memstore.New[string, Node](),
		Leases:      memstore.New[string, Lease](),
		Events:      memstore.New[string, events.Event](),
	}
}

// NewInformers returns an informer per kind over s, named after the kind.
// Run them (a reconcile.Manager runs the informers of the controllers it is
// given) before reading their caches.
func NewInformers(s Stores, opts ...informer.Option) Informers {
	return Informers{
		Deployments: informer.New("deployments", s.Deployments, opts...),
		ReplicaSets: informer.New("replicasets", s.ReplicaSets, opts...),
		Pods:        informer.New("pods", s.Pods, opts...),
		Nodes:       informer.New("nodes", s.Nodes, opts...),
		Leases:      informer.New("leases", s.Leases, opts...),
	}
}
