package apiserver

import (
	"fmt"
	"strings"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
)

// NewStores returns the stores of the control plane at baseURL (for
// example "http://127.0.0.1:6443"), one httpstore client per kind, sending
// token (empty: none). Their writes are admitted by the server: a refused
// one returns an error matching httpstore.ErrInvalid, whose message is
// the server's. It fails only on a bad URL or token; it does not contact
// the server.
func NewStores(baseURL, token string, opts httpstore.ClientOptions) (api.Stores, error) {
	base := strings.TrimSuffix(baseURL, "/") + "/store/"
	opts.Token = token
	var st api.Stores
	var err error
	if st.Deployments, err = client[api.Deployment](base+"deployments", opts); err != nil {
		return api.Stores{}, err
	}
	st.ReplicaSets, _ = client[api.ReplicaSet](base+"replicasets", opts)
	st.Pods, _ = client[api.Pod](base+"pods", opts)
	st.Nodes, _ = client[api.Node](base+"nodes", opts)
	st.Leases, _ = client[api.Lease](base+"leases", opts)
	st.Events, _ = client[events.Event](base+"events", opts)
	return st, nil
}

// client returns an httpstore client; every kind's URL and token are
// checked by the first one, so the others cannot fail.
func client[V any](url string, opts httpstore.ClientOptions) (informer.Store[string, V], error) {
	c, err := httpstore.NewClient[V](url, opts)
	if err != nil {
		return nil, fmt.Errorf("the control plane's address %q: %w", strings.TrimSuffix(url, "/store/deployments"), err)
	}
	return c, nil
}

// NewNodeStores returns the stores of node's agent: NewStores', except that
// the pods' List and Watch ask for the pods bound to node only (the field
// selector spec.nodeName=node, as kubelet's), so that the server sends the
// agent the writes of its own pods and no others; a pod rebound elsewhere
// or deleted is a Delete.
func NewNodeStores(baseURL, token, node string, opts httpstore.ClientOptions) (api.Stores, error) {
	st, err := NewStores(baseURL, token, opts)
	if err != nil {
		return api.Stores{}, err
	}
	opts.Token = token
	opts.Selector = "spec.nodeName=" + node
	st.Pods, _ = client[api.Pod](strings.TrimSuffix(baseURL, "/")+"/store/pods", opts)
	return st, nil
}
