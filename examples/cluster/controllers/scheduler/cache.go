package scheduler

import (
	"context"
	"fmt"
	"slices"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// nodeCache is the scheduler's view of every node and the pods that hold
// resources on it, kept up to date change by change from the pods and
// nodes informers and from the scheduler's own assumptions, as
// kube-scheduler's cache is (k8s@v1.37.2:pkg/scheduler/backend/cache):
// a scheduling cycle reads each node's totals, so it costs O(nodes) and
// never walks the pods. It is guarded by the scheduler's mu.
type nodeCache struct {
	// nodes holds one nodeInfo per node the informer shows, and one per
	// node name that only pods name (they count once the node shows up).
	nodes map[string]*nodeInfo
	// known is true for the nodes the informer shows.
	known map[string]bool
	// pods is every pod counted on a node, by pod key.
	pods map[string]cachedPod
	// sorted is the known nodes ordered by key; nil once that set
	// changed, rebuilt by the next cycle.
	sorted []*nodeInfo
}

// cachedPod is one pod counted on a node. An assumed pod is one the
// scheduler has bound (or is binding) that the pods informer has not
// shown bound yet. info holds the sums only (its pod is zero): the cache
// needs no more, and keeps no second copy of every pod's fields.
type cachedPod struct {
	node    string
	uid     string
	info    podInfo
	assumed bool
}

func newCachedPod(node, uid string, pi podInfo, assumed bool) cachedPod {
	pi.pod = api.Pod{}
	return cachedPod{node: node, uid: uid, info: pi, assumed: assumed}
}

func newNodeCache() *nodeCache {
	return &nodeCache{nodes: map[string]*nodeInfo{}, known: map[string]bool{}, pods: map[string]cachedPod{}}
}

// list returns the known nodes ordered by key. The nodeInfos are the
// cache's own: read them only while mu is held.
func (c *nodeCache) list() []*nodeInfo {
	if c.sorted == nil {
		keys := make([]string, 0, len(c.known))
		for key := range c.known {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		c.sorted = make([]*nodeInfo, len(keys))
		for i, key := range keys {
			c.sorted[i] = c.nodes[key]
		}
	}
	return c.sorted
}

// nodeInfo returns name's nodeInfo, made empty if there is none.
func (c *nodeCache) nodeInfo(name string) *nodeInfo {
	ni, ok := c.nodes[name]
	if !ok {
		n := newNodeInfo(api.Node{}, nil)
		ni = &n
		c.nodes[name] = ni
	}
	return ni
}

// setNode records the informer's node under its key.
func (c *nodeCache) setNode(key string, n api.Node) {
	c.nodeInfo(key).setNode(n)
	if !c.known[key] {
		c.known[key] = true
		c.sorted = nil
	}
}

// deleteNode forgets a node the informer no longer shows. Its pods stay
// counted under its name, as they would be on a node of that name added
// again.
func (c *nodeCache) deleteNode(key string) {
	if !c.known[key] {
		return
	}
	delete(c.known, key)
	c.sorted = nil
	if ni := c.nodes[key]; ni.pods == 0 {
		delete(c.nodes, key)
	}
}

// setPod records the informer's value of a pod: counted on its node while
// it is bound and has not ended, not counted otherwise. An assumption
// survives an unbound value of the same pod (the informer has not shown
// the bind yet), and gives way to a bound one.
func (c *nodeCache) setPod(key string, p api.Pod) {
	if old, ok := c.pods[key]; ok && old.assumed && p.Spec.NodeName == "" && old.uid == p.UID {
		return
	}
	c.removePod(key)
	if p.Spec.NodeName == "" || !holdsResources(p) {
		return
	}
	pi, err := newPodInfo(p)
	if err != nil {
		pi = podInfo{} // bound anyway: it takes a pod slot
	}
	c.addPod(key, newCachedPod(p.Spec.NodeName, p.UID, pi, false))
}

// assume counts a pod on node before the informer shows it bound there.
func (c *nodeCache) assume(key, node string, pi podInfo) {
	c.removePod(key)
	c.addPod(key, newCachedPod(node, pi.pod.UID, pi, true))
}

// forget undoes assume for a pod whose bind failed; a pod the informer
// has shown bound meanwhile stays counted.
func (c *nodeCache) forget(key, uid string) {
	if cp, ok := c.pods[key]; ok && cp.assumed && cp.uid == uid {
		c.removePod(key)
	}
}

// counted reports whether the pod with key and uid is counted on a node
// already: assumed by an earlier cycle, or shown bound.
func (c *nodeCache) counted(key, uid string) bool {
	cp, ok := c.pods[key]
	return ok && cp.uid == uid
}

func (c *nodeCache) addPod(key string, cp cachedPod) {
	c.pods[key] = cp
	c.nodeInfo(cp.node).add(&cp.info)
}

func (c *nodeCache) removePod(key string) {
	cp, ok := c.pods[key]
	if !ok {
		return
	}
	delete(c.pods, key)
	ni := c.nodes[cp.node]
	ni.remove(&cp.info)
	if ni.pods == 0 && !c.known[cp.node] {
		delete(c.nodes, cp.node)
	}
}

// podHandler and nodeHandler feed the informers' changes to the cache.
type podHandler struct{ s *scheduler }

func (h podHandler) OnAdd(key string, p api.Pod, _ bool) {
	h.s.locked(func(c *nodeCache) { c.setPod(key, p) })
}
func (h podHandler) OnUpdate(key string, _, p api.Pod, _ bool) {
	h.s.locked(func(c *nodeCache) { c.setPod(key, p) })
}
func (h podHandler) OnDelete(key string, _ api.Pod) {
	h.s.locked(func(c *nodeCache) { c.removePod(key) })
}

type nodeHandler struct{ s *scheduler }

func (h nodeHandler) OnAdd(key string, n api.Node, _ bool) {
	h.s.locked(func(c *nodeCache) { c.setNode(key, n) })
}
func (h nodeHandler) OnUpdate(key string, _, n api.Node, _ bool) {
	h.s.locked(func(c *nodeCache) { c.setNode(key, n) })
}
func (h nodeHandler) OnDelete(key string, _ api.Node) {
	h.s.locked(func(c *nodeCache) { c.deleteNode(key) })
}

func (s *scheduler) locked(f func(*nodeCache)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.cache)
}

// watchCache adds the cache's handlers to the informers. They stay for
// the informers' lifetime, across the controller's runs, as the cache
// does.
func (s *scheduler) watchCache() error {
	s.cache = newNodeCache()
	nodes, err := s.nodes.AddHandler(nodeHandler{s})
	if err != nil {
		return fmt.Errorf("scheduler: nodes informer: %w", err)
	}
	pods, err := s.pods.AddHandler(podHandler{s})
	if err != nil {
		nodes.Remove()
		return fmt.Errorf("scheduler: pods informer: %w", err)
	}
	s.nodeReg, s.podReg = nodes, pods
	return nil
}

// unwatchCache removes the cache's handlers.
func (s *scheduler) unwatchCache() {
	s.nodeReg.Remove()
	s.podReg.Remove()
}

// cacheCaughtUp waits until the cache has been given every change the
// informers hold now, so that a cycle sees at least what the reconcile
// read from them (a pod deleted before its waiting pod was retried has
// freed its node).
func (s *scheduler) cacheCaughtUp(ctx context.Context) error {
	if err := caughtUp(ctx, s.nodeReg, s.nodes.LastRevision()); err != nil {
		return err
	}
	return caughtUp(ctx, s.podReg, s.pods.LastRevision())
}

func caughtUp[V any](ctx context.Context, reg *informer.Registration[string, V], rev informer.Revision) error {
	done := make(chan struct{})
	stop := reg.AfterRevision(rev, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		stop()
		return context.Cause(ctx)
	}
}
