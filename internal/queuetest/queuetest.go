// Package queuetest holds the test helpers that the queue engine,
// internal/workqueue, and its public face, queue, share.
package queuetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Queue is what the helpers need of a queue: both packages' queues have it.
type Queue[K comparable] interface {
	Get() (key K, shutdown bool)
	Done(key K)
	Len() int
	ShutDown()
}

// Get is q.Get that fails the test instead of blocking forever.
func Get[K comparable](t testing.TB, q Queue[K]) K {
	t.Helper()
	type got struct {
		key      K
		shutdown bool
	}
	ch := make(chan got, 1)
	go func() {
		k, s := q.Get()
		ch <- got{k, s}
	}()
	select {
	case g := <-ch:
		require.False(t, g.shutdown, "Get reported shutdown")
		return g.key
	case <-time.After(5 * time.Second):
		q.ShutDown() // unblock the goroutine
		require.FailNow(t, "Get blocked with nothing ready")
		var zero K
		return zero
	}
}

// Drain takes every ready key, marking each done, in the order Get gives.
func Drain[K comparable](t testing.TB, q Queue[K]) []K {
	t.Helper()
	var keys []K
	for q.Len() > 0 {
		k := Get(t, q)
		keys = append(keys, k)
		q.Done(k)
	}
	return keys
}

// Tenant is a group function (WithGroup) for keys "tenant/name": the
// part before the first slash.
func Tenant(k string) string { return strings.SplitN(k, "/", 2)[0] }
