package informer

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// The cache's map, sized for a list so that its memory is what the entries
// need (docs/design/informer-memory.md has the account).
//
// A Go map of more than 1024 slots is a power-of-two number of tables of
// 1024 slots each, and a table splits in two when it is 7/8 full. So a
// map of n entries holds between 8/7 n and 16/7 n slots: 1M entries take
// 2^21 slots, 48% full, 84 B per entry for a string key and an 8-byte
// value with its revision (33,792 B of groups per table, allocated as
// 40,960). Splitting the entries over a number of maps that is not a power
// of two, each sized to fill its tables to about 80%, makes the total
// number of tables close to n/819 at every n: 1M entries take 1,280
// tables instead of 2,048. The price is one hash of the key, to find its
// map, on every access of a cache of more than one shard.

// item is a cached value and the revision of the change that set it.
type item[V any] struct {
	value V
	// rev is the revision of the last Put applied to the key, or the one
	// the list that last set it gave the entry (the list's own if none),
	// or that of a bad value of the key met since (see BadKey). Events
	// for the key at or below it are duplicates and are skipped.
	rev Revision
}

const (
	// tableSlots is the most slots a table of a Go map has
	// (internal/runtime/maps.maxTableCapacity).
	tableSlots = 1024
	// tableFill is the entries per table that a map sized for a list
	// aims at: 80% of its slots. A table splits above 7/8 (896), 2.7
	// standard deviations above 819 for a table's count of entries under
	// a uniform hash, so about 1 table in 300 splits as the list fills
	// the map.
	tableFill = tableSlots * 4 / 5
	// minShards is the fewest shards a map of more than one table is
	// split into: the total number of tables is then at most 1/16 above
	// what the entries need (a shard's tables are a power of two).
	minShards = 16
)

// itemMap is a map from key to item, split into shards.
type itemMap[K comparable, V any] struct {
	// shards partition the keys: key is in shards[shardOf(key)] or in
	// none. Never empty. With one shard, shardOf is 0 and hashes nothing.
	shards []map[K]item[V]
	seed   maphash.Seed
}

// newItemMap returns an empty map sized for n entries.
func newItemMap[K comparable, V any](n int) itemMap[K, V] {
	count, hint := shardsFor(n)
	m := itemMap[K, V]{shards: make([]map[K]item[V], count), seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i] = make(map[K]item[V], hint)
	}
	return m
}

// shardsFor returns how many shards a map for n entries has, and the
// size hint of each: n/count entries, which make(map, hint) gives
// 2^k tables for, 2^k*tableFill >= hint.
func shardsFor(n int) (count, hint int) {
	tables := (n + tableFill - 1) / tableFill
	if tables <= 1 {
		return 1, n
	}
	perShard := 1 // tables per shard: a power of two, as make gives
	for tables/(2*perShard) >= minShards {
		perShard *= 2
	}
	count = (tables + perShard - 1) / perShard
	return count, (n + count - 1) / count
}

// shard returns the shard that holds key, if any map does, and that a new
// key goes to.
func (m itemMap[K, V]) shard(key K) map[K]item[V] {
	if len(m.shards) == 1 {
		return m.shards[0]
	}
	// Lemire's multiply-shift: the high word of hash*count is uniform
	// in [0, count) without a division.
	i, _ := bits.Mul64(maphash.Comparable(m.seed, key), uint64(len(m.shards)))
	return m.shards[i]
}

// get returns key's item.
func (m itemMap[K, V]) get(key K) (item[V], bool) {
	it, ok := m.shard(key)[key]
	return it, ok
}

// len returns the number of entries.
func (m itemMap[K, V]) len() int {
	n := 0
	for _, s := range m.shards {
		n += len(s)
	}
	return n
}

// all yields every entry, in no particular order. The loop's body may
// change the map, with the Go spec's rules for a map changed while ranged
// over: an entry removed before it is reached is not yielded, one added
// may or may not be.
func (m itemMap[K, V]) all() iter.Seq2[K, item[V]] {
	return func(yield func(K, item[V]) bool) {
		for _, s := range m.shards {
			for k, it := range s {
				if !yield(k, it) {
					return
				}
			}
		}
	}
}
