package informer

import (
	"errors"
	"fmt"
)

// AddIndex adds a secondary index named name to the informer, at any time:
// before Run, or while it runs. On a filled cache it files every cached
// entry under fn's values before it returns, in O(n) calls of fn under the
// informer's write lock, so the cache and every other method wait for it;
// from then on ByIndex answers for the new index and every change keeps it
// up to date, as for an index given to New with WithIndex.
//
// It is for code that learns what it must look up only once the informer
// exists (reconcile.Owns adds its owner index to a child informer it is
// given). It returns an error, and changes nothing, if fn is nil, if an
// index named name exists, or if fn panics on a cached entry (the panic is
// in the error).
func (inf *Informer[K, V]) AddIndex(name string, fn IndexFunc[K, V]) error {
	if fn == nil {
		return fmt.Errorf("informer %q: AddIndex(%q): nil IndexFunc", inf.name, name)
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.cache.hasIndex(name) {
		return fmt.Errorf("informer %q: AddIndex(%q): %w", inf.name, name, errIndexExists)
	}
	if err := inf.cache.addIndex(name, fn); err != nil {
		return fmt.Errorf("informer %q: AddIndex(%q): %w", inf.name, name, err)
	}
	return nil
}

// errIndexExists is AddIndex's error for a name in use.
var errIndexExists = errors.New("an index of that name exists")

// RemoveIndex removes the secondary index named name, if there is one, and
// reports whether there was. ByIndex then panics for name, as for an index
// never added, and the name can be added again. It is for code that adds an
// index as one step of a setup that may fail after it (reconcile.New rolls
// an Owns back this way); an index given to New with WithIndex can be
// removed too.
func (inf *Informer[K, V]) RemoveIndex(name string) bool {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	c := inf.cache
	i, ok := c.byName[name]
	if !ok {
		return false
	}
	c.indexes = append(c.indexes[:i], c.indexes[i+1:]...)
	delete(c.byName, name)
	for j := i; j < len(c.indexes); j++ {
		c.byName[c.indexes[j].name] = j
	}
	return true
}

// IndexNames returns the names of the informer's secondary indexes, in the
// order they were added (WithIndex's first); none (nil) if it has none.
// reconcile.Owned finds a child informer's owner indexes by their names.
func (inf *Informer[K, V]) IndexNames() []string {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	if len(inf.cache.indexes) == 0 {
		return nil
	}
	names := make([]string, len(inf.cache.indexes))
	for i, ix := range inf.cache.indexes {
		names[i] = ix.name
	}
	return names
}
