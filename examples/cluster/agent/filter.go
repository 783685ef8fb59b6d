package agent

import (
	"context"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// nodePods is the pod source of one node's agent: the pods bound to the
// node, so that the agent caches its own pods only. A pod that leaves the
// node (rebound, or its Put no longer names the node) reaches the informer
// as a Delete; for a pod it never held, the informer ignores that Delete.
// Over the API (Main), the server already sends only the node's pods,
// asked with the field selector spec.nodeName=<node> as kubelet asks
// (apiserver.NewNodeStores); this filter makes the same hold over any
// store, as in the tests' memory stores.
type nodePods struct {
	src  informer.Source[string, api.Pod]
	node string
}

func (s nodePods) List(ctx context.Context) ([]informer.Entry[string, api.Pod], informer.Revision, error) {
	entries, rev, err := s.src.List(ctx)
	if err != nil {
		return nil, 0, err
	}
	out := entries[:0]
	for _, e := range entries {
		if e.Err == nil && e.Value.Spec.NodeName == s.node {
			out = append(out, e)
		}
	}
	return out, rev, nil
}

func (s nodePods) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, api.Pod]) error) error {
	return s.src.Watch(ctx, after, func(ev informer.Event[string, api.Pod]) error {
		if ev.Type == informer.Put && (ev.Err != nil || ev.Value.Spec.NodeName != s.node) {
			ev = informer.Event[string, api.Pod]{Type: informer.Delete, Key: ev.Key, Revision: ev.Revision}
		}
		return emit(ev)
	})
}
