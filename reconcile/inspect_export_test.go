package reconcile

import "github.com/converge-go/converge/reconcile/internal/debugpage"

// Inspect is the snapshot the controller's debug page shows, for tests.
func Inspect[K comparable](c *Controller[K]) debugpage.ControllerInfo { return c.inspect() }

// InspectKey is what the key's debug page shows, for tests.
func InspectKey[K comparable](c *Controller[K], key K) (debugpage.KeyInfo, bool) {
	return c.inspectKey(key)
}
