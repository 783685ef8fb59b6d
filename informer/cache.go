package informer

import (
	"fmt"
	"iter"
	"runtime/debug"
)

// IndexFunc returns the values under which an entry is filed in a secondary
// index: the owner of an object, its labels, its node. An entry may have
// any number of values, none included (it is then absent from the index).
//
// It must be a pure function of key and v, and fast: the informer calls it
// under its write lock on every change, once for the new value and once for
// the old one, which it recomputes instead of storing, so that an index
// costs no memory per entry beyond the index itself. The returned slice is
// not kept, so the function may reuse it from call to call.
//
// A panic in it is recovered: the change that made the informer call it is
// skipped (see [Stats].Panics).
//
// Do not mutate a cached value in place (through a pointer V, say): the old
// value's index values would then be recomputed from the new state, and the
// entry would stay filed under values it no longer has.
type IndexFunc[K comparable, V any] func(key K, v V) []string

// index is one secondary index.
type index[K comparable, V any] struct {
	name string
	fn   IndexFunc[K, V]
	// keys[value] is the set of keys whose entry fn files under value.
	// Invariant, after every set and remove: k is in keys[val] exactly
	// when k is cached and val is among fn(k, its value). Empty sets are
	// deleted, so the index never holds more than the live entries'
	// values.
	keys map[string]map[K]struct{}
}

// filed holds the values every index files one entry under: index i's are
// vals[ends[i-1]:ends[i]]. Copied out of the IndexFuncs' results, which
// they may reuse, and kept for reuse so that filing allocates nothing.
type filed struct {
	vals []string
	ends []int
}

// cache is the informer's indexed map. It is not safe for concurrent use:
// the Informer guards it with its mutex.
type cache[K comparable, V any] struct {
	items itemMap[K, V]
	// indexes are in the order they were added: WithIndex's at New, then
	// AddIndex's.
	indexes []index[K, V]
	byName  map[string]int
	// scratch for set and remove: the new and the old value's filing.
	newVals, oldVals filed
	// writes counts the changes that may add a key to the maps or remove
	// one (set, remove, a grow that replaces them): a replay that finds it
	// unchanged between two chunks knows no key can come up twice.
	writes uint64
}

func newCache[K comparable, V any]() *cache[K, V] {
	return &cache[K, V]{items: newItemMap[K, V](0), byName: make(map[string]int)}
}

// addIndex adds an index and files every cached entry in it. If fn panics
// on an entry it returns the panic as an error and leaves the cache as it
// was: the index is built aside and added only once complete.
func (c *cache[K, V]) addIndex(name string, fn IndexFunc[K, V]) error {
	ix := index[K, V]{name: name, fn: fn, keys: make(map[string]map[K]struct{})}
	if err := ix.fill(c.items); err != nil {
		return err
	}
	c.byName[name] = len(c.indexes)
	c.indexes = append(c.indexes, ix)
	return nil
}

// fill files every item in ix, recovering a panic of its IndexFunc as an
// error.
func (ix *index[K, V]) fill(items itemMap[K, V]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &recovered{what: fmt.Sprintf("IndexFunc %q", ix.name), value: r, stack: debug.Stack()}
		}
	}()
	for k, it := range items.all() {
		for _, val := range ix.fn(k, it.value) {
			keys := ix.keys[val]
			if keys == nil {
				keys = make(map[K]struct{})
				ix.keys[val] = keys
			}
			keys[k] = struct{}{}
		}
	}
	return nil
}

// hasIndex reports whether there is an index named name.
func (c *cache[K, V]) hasIndex(name string) bool {
	_, ok := c.byName[name]
	return ok
}

// grow makes room for n more items in an empty cache, so that filling it
// does not rehash as it grows, and sizes it so that n items fill its
// memory (see itemMap).
func (c *cache[K, V]) grow(n int) {
	if c.items.len() == 0 {
		c.items = newItemMap[K, V](n)
		c.writes++
	}
}

// len returns the number of cached items.
func (c *cache[K, V]) len() int { return c.items.len() }

// get returns the cached item for key.
func (c *cache[K, V]) get(key K) (item[V], bool) { return c.items.get(key) }

// all yields every cached item; see itemMap.all.
func (c *cache[K, V]) all() iter.Seq2[K, item[V]] { return c.items.all() }

// set stores v for key at rev and returns the value it replaced, if any.
// It calls the IndexFuncs before it changes anything, so that if one
// panics it returns the panic as an error and the cache is as it was.
func (c *cache[K, V]) set(key K, v V, rev Revision) (old V, existed bool, err error) {
	items := c.items.shard(key)
	prev, existed := items[key]
	if len(c.indexes) > 0 {
		if err := c.file(key, v, &c.newVals); err != nil {
			return old, existed, err
		}
		if existed {
			if err := c.file(key, prev.value, &c.oldVals); err != nil {
				return old, existed, err
			}
			c.unindex(key, &c.oldVals)
		}
		c.index(key, &c.newVals)
	}
	items[key] = item[V]{value: v, rev: rev}
	c.writes++
	return prev.value, existed, nil
}

// setRev records that key's cached value is current as of rev; for a
// value of key that could not be taken (see Informer.markBadLocked).
func (c *cache[K, V]) setRev(key K, rev Revision) {
	items := c.items.shard(key)
	if it, ok := items[key]; ok {
		it.rev = rev
		items[key] = it
	}
}

// remove deletes key and returns the value it held, if any. If an
// IndexFunc panics on that value (so it is not a pure function), it still
// removes key, from every index by a scan, and returns the panic as an
// error too.
func (c *cache[K, V]) remove(key K) (last V, existed bool, err error) {
	items := c.items.shard(key)
	prev, existed := items[key]
	if !existed {
		return last, false, nil
	}
	if len(c.indexes) > 0 {
		if err = c.file(key, prev.value, &c.oldVals); err != nil {
			c.purge(key)
		} else {
			c.unindex(key, &c.oldVals)
		}
	}
	delete(items, key)
	c.writes++
	return prev.value, true, err
}

// file computes every index's values for (key, v) into f, recovering a
// panic of an IndexFunc as an error.
func (c *cache[K, V]) file(key K, v V, f *filed) (err error) {
	f.vals, f.ends = f.vals[:0], f.ends[:0]
	i := 0
	defer func() {
		if r := recover(); r != nil {
			err = &recovered{what: fmt.Sprintf("IndexFunc %q", c.indexes[i].name), value: r, stack: debug.Stack()}
		}
	}()
	for ; i < len(c.indexes); i++ {
		f.vals = append(f.vals, c.indexes[i].fn(key, v)...)
		f.ends = append(f.ends, len(f.vals))
	}
	return nil
}

func (c *cache[K, V]) index(key K, f *filed) {
	start := 0
	for i, end := range f.ends {
		idx := c.indexes[i].keys
		for _, val := range f.vals[start:end] {
			keys := idx[val]
			if keys == nil {
				keys = make(map[K]struct{})
				idx[val] = keys
			}
			keys[key] = struct{}{}
		}
		start = end
	}
	clear(f.vals) // do not keep the strings alive
}

func (c *cache[K, V]) unindex(key K, f *filed) {
	start := 0
	for i, end := range f.ends {
		idx := c.indexes[i].keys
		for _, val := range f.vals[start:end] {
			keys := idx[val]
			delete(keys, key)
			if len(keys) == 0 {
				delete(idx, val)
			}
		}
		start = end
	}
	clear(f.vals)
}

// purge removes key from every index by scanning them all: the way out
// when its values cannot be recomputed.
func (c *cache[K, V]) purge(key K) {
	for _, ix := range c.indexes {
		for val, keys := range ix.keys {
			delete(keys, key)
			if len(keys) == 0 {
				delete(ix.keys, val)
			}
		}
	}
}

// byIndex returns the entries filed under value in the named index. It
// panics if there is no such index: an unknown name is a bug in the caller
// (a typo, or an index added too late), and an empty answer would hide it.
func (c *cache[K, V]) byIndex(name, value string) []Entry[K, V] {
	i, ok := c.byName[name]
	if !ok {
		panic(fmt.Sprintf("informer: no index named %q", name))
	}
	keys := c.indexes[i].keys[value]
	out := make([]Entry[K, V], 0, len(keys))
	for k := range keys {
		it, _ := c.items.get(k)
		out = append(out, Entry[K, V]{Key: k, Value: it.value, Revision: it.rev})
	}
	return out
}

// entries returns every cached entry, in no particular order.
func (c *cache[K, V]) entries() []Entry[K, V] {
	out := make([]Entry[K, V], 0, c.items.len())
	for k, it := range c.items.all() {
		out = append(out, Entry[K, V]{Key: k, Value: it.value, Revision: it.rev})
	}
	return out
}
