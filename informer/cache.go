package informer

import "fmt"

// IndexFunc returns the values under which an entry is filed in a secondary
// index: the owner of an object, its labels, its node. An entry may have
// any number of values, none included (it is then absent from the index).
//
// It must be a pure function of key and v, and fast: the informer calls it
// under its write lock on every change, once for the new value and once for
// the old one, which it recomputes instead of storing, so that an index
// costs no memory per entry beyond the index itself. The returned slice is
// not kept, and may be reused by the caller.
type IndexFunc[K comparable, V any] func(key K, v V) []string

// item is a cached value and the revision of the change that set it.
type item[V any] struct {
	value V
	// rev is the revision of the last Put applied to the key, or of the
	// list that last set it. Events for the key at or below it are
	// duplicates and are skipped.
	rev Revision
}

// cache is the informer's indexed map. It is not safe for concurrent use:
// the Informer guards it with its mutex.
type cache[K comparable, V any] struct {
	items map[K]item[V]

	// indexFuncs are the secondary indexes, by name; fixed at New.
	indexFuncs map[string]IndexFunc[K, V]

	// indices[name][value] is the set of keys whose entry indexFuncs[name]
	// files under value. Invariant, after every set and remove: k is in
	// indices[name][val] exactly when k is in items and val is among
	// indexFuncs[name](k, items[k].value). Empty sets are deleted, so the
	// indices never hold more than the live entries' values.
	indices map[string]map[string]map[K]struct{}
}

func newCache[K comparable, V any](indexFuncs map[string]IndexFunc[K, V]) *cache[K, V] {
	c := &cache[K, V]{
		items:      make(map[K]item[V]),
		indexFuncs: indexFuncs,
		indices:    make(map[string]map[string]map[K]struct{}, len(indexFuncs)),
	}
	for name := range indexFuncs {
		c.indices[name] = make(map[string]map[K]struct{})
	}
	return c
}

// grow makes room for n more items in an empty cache, so that filling it
// does not rehash as it grows.
func (c *cache[K, V]) grow(n int) {
	if len(c.items) == 0 {
		c.items = make(map[K]item[V], n)
	}
}

// get returns the cached item for key.
func (c *cache[K, V]) get(key K) (item[V], bool) {
	it, ok := c.items[key]
	return it, ok
}

// set stores v for key at rev and returns the value it replaced, if any.
func (c *cache[K, V]) set(key K, v V, rev Revision) (old V, existed bool) {
	prev, existed := c.items[key]
	if existed {
		c.unindex(key, prev.value)
	}
	c.items[key] = item[V]{value: v, rev: rev}
	c.index(key, v)
	return prev.value, existed
}

// remove deletes key and returns the value it held, if any.
func (c *cache[K, V]) remove(key K) (last V, existed bool) {
	prev, existed := c.items[key]
	if !existed {
		return last, false
	}
	c.unindex(key, prev.value)
	delete(c.items, key)
	return prev.value, true
}

func (c *cache[K, V]) index(key K, v V) {
	for name, fn := range c.indexFuncs {
		idx := c.indices[name]
		for _, val := range fn(key, v) {
			keys := idx[val]
			if keys == nil {
				keys = make(map[K]struct{})
				idx[val] = keys
			}
			keys[key] = struct{}{}
		}
	}
}

func (c *cache[K, V]) unindex(key K, v V) {
	for name, fn := range c.indexFuncs {
		idx := c.indices[name]
		for _, val := range fn(key, v) {
			keys := idx[val]
			delete(keys, key)
			if len(keys) == 0 {
				delete(idx, val)
			}
		}
	}
}

// byIndex returns the entries filed under value in the named index. It
// panics if there is no such index: index names are fixed when the informer
// is built, so an unknown one is a bug in the caller, and an empty answer
// would hide it.
func (c *cache[K, V]) byIndex(name, value string) []Entry[K, V] {
	idx, ok := c.indices[name]
	if !ok {
		panic(fmt.Sprintf("informer: no index named %q", name))
	}
	keys := idx[value]
	out := make([]Entry[K, V], 0, len(keys))
	for k := range keys {
		out = append(out, Entry[K, V]{Key: k, Value: c.items[k].value})
	}
	return out
}

// entries returns every cached entry, in no particular order.
func (c *cache[K, V]) entries() []Entry[K, V] {
	out := make([]Entry[K, V], 0, len(c.items))
	for k, it := range c.items {
		out = append(out, Entry[K, V]{Key: k, Value: it.value})
	}
	return out
}
