package backoff_test

import (
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-go/converge/backoff"
)

// The limiters must drop into client-go and controller-runtime work queues
// unchanged; these fail to compile if the method sets ever drift apart.
var (
	_ workqueue.TypedRateLimiter[string] = backoff.NewPerKey[string](backoff.Exponential{})
	_ workqueue.TypedRateLimiter[string] = backoff.NewBucket[string](10, 100, nil)
	_ workqueue.TypedRateLimiter[string] = backoff.Max[string]()
	_ workqueue.TypedRateLimiter[string] = backoff.DefaultController[string](nil)

	// And the other way: client-go's limiters are converge Limiters.
	_ backoff.Limiter[string] = workqueue.DefaultTypedControllerRateLimiter[string]()
)
