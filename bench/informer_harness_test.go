package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
)

// TestInformerScenarios runs the informer scenarios' code on a small
// source, for both informers: the handler must count every add, see the
// final version of every updated key, and neither informer may restart.
func TestInformerScenarios(t *testing.T) {
	const n, updates = 1000, 2500 // 2-3 updates per key
	o := newInformerObjects(n, updates)
	assert.Equal(t, n, o.updated)
	for _, im := range infImpls {
		t.Run(im.name, func(t *testing.T) {
			p := im.newPipeline(o, updates)
			h := newObjHandler(o, true)
			p.start(h)
			require.True(t, waitOrTimeout(h.addsDone, informerTimeout), "adds: %d of %d", h.addCount(), n)
			require.NoError(t, p.waitSynced(informerTimeout))
			for _, u := range o.updates {
				p.push(u)
			}
			ok := waitOrTimeout(h.fanDone, informerTimeout)
			p.stop()
			require.True(t, ok, "%d keys not seen in their final version", h.remaining.Load())
			require.NoError(t, p.check())
			assert.Equal(t, n, h.addCount())
			assert.Equal(t, o.final, h.got, "the handler ends with every key's final version")
			assert.LessOrEqual(t, h.updates, updates)
			assert.GreaterOrEqual(t, h.updates, n)
			if im.name == "client-go" {
				assert.Equal(t, updates, h.updates, "client-go delivers every update")
			}
		})
	}
}

// TestBenchObjKeys checks that client-go's key for an object is the key the
// memory store holds it under, so both informers cache the same keys.
func TestBenchObjKeys(t *testing.T) {
	o := newInformerObjects(100, 0)
	for i, obj := range o.objs {
		k, err := cache.MetaNamespaceKeyFunc(obj)
		require.NoError(t, err)
		require.Equal(t, o.keys[i], k)
	}
	c := o.objs[7].DeepCopyObject().(*benchObj)
	assert.Equal(t, o.objs[7], c)
	assert.NotSame(t, o.objs[7], c)
	assert.Equal(t, "10k", sizeName(10_000))
	assert.Equal(t, "1M", sizeName(1_000_000))
	assert.Equal(t, fmt.Sprint(1234), sizeName(1234))
}
