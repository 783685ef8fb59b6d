package main

import (
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/deployment"
	"github.com/converge-go/converge/examples/cluster/controllers/garbagecollector"
	"github.com/converge-go/converge/examples/cluster/controllers/nodelifecycle"
	"github.com/converge-go/converge/examples/cluster/controllers/replicaset"
	"github.com/converge-go/converge/examples/cluster/controllers/scheduler"
	"github.com/converge-go/converge/reconcile"
)

// controllers are the control plane's controllers, which `cluster up` adds
// to its one Manager, in this order. Each package's Add builds its
// controllers on the cluster's informers and writes through its stores.
var controllers = []struct {
	name string
	add  func(m *reconcile.Manager, c *api.Cluster) error
}{
	{"deployment", deployment.Add},
	{"replicaset", replicaset.Add},
	{"scheduler", scheduler.Add},
	{"nodelifecycle", nodelifecycle.Add},
	{"garbagecollector", garbagecollector.Add},
}
