package workqueue

// index maps keys to slab indexes. It is an open-addressing hash table with
// linear probing rather than a Go map because a map stores each key a second
// time (the slab already holds it) and pads every slot to the key's
// alignment: for string keys that is 24 bytes a slot against 8 here. It also
// lets Add find-or-insert and Done find-then-delete with one hash each.
//
// A slot holds tag<<32 | idx+1, where tag is the low 32 bits of the key's
// hash and 0 means empty. A key's home slot is tag&mask, so growing the table
// rehashes nothing, and a tag mismatch skips most key comparisons.
// Deletion shifts later entries of the probe run back instead of leaving
// tombstones, so lookups never slow down with churn.
type index[K comparable] struct {
	slots []uint64 // len is a power of two
	mask  uint32   // len(slots)-1
	n     int      // occupied slots
}

const minIndexSlots = 16

func newIndex[K comparable]() index[K] {
	return index[K]{slots: make([]uint64, minIndexSlots), mask: minIndexSlots - 1}
}

// find returns key's slab index, or none and the empty slot where key would
// go. tag must be the key's hash (Queue.tag) truncated to 32 bits.
func (x *index[K]) find(es []entry[K], key K, tag uint32) (idx int32, pos uint32) {
	pos = tag & x.mask
	for {
		s := x.slots[pos]
		if s == 0 {
			return none, pos
		}
		if uint32(s>>32) == tag {
			if i := int32(uint32(s)) - 1; es[i].key == key {
				return i, pos
			}
		}
		pos = (pos + 1) & x.mask
	}
}

// insert stores idx for a key that find reported absent at pos.
func (x *index[K]) insert(pos, tag uint32, idx int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(len(x.slots) * 2)
		pos = x.emptySlot(tag)
	}
	x.slots[pos] = uint64(tag)<<32 | uint64(uint32(idx+1))
	x.n++
}

// deleteAt empties the slot at pos, which find returned for a present key.
func (x *index[K]) deleteAt(pos uint32) {
	x.n--
	if x.n == 0 && len(x.slots) > shrinkAbove {
		x.slots, x.mask = make([]uint64, minIndexSlots), minIndexSlots-1
		return
	}
	hole := pos
	for j := (pos + 1) & x.mask; ; j = (j + 1) & x.mask {
		s := x.slots[j]
		if s == 0 {
			break
		}
		// The entry at j may fill the hole if the hole lies on its probe
		// path, that is, at least as far from j as its home is.
		home := uint32(s>>32) & x.mask
		if (j-home)&x.mask >= (j-hole)&x.mask {
			x.slots[hole] = s
			hole = j
		}
	}
	x.slots[hole] = 0
}

func (x *index[K]) emptySlot(tag uint32) uint32 {
	pos := tag & x.mask
	for x.slots[pos] != 0 {
		pos = (pos + 1) & x.mask
	}
	return pos
}

func (x *index[K]) resize(size int) {
	old := x.slots
	x.slots, x.mask = make([]uint64, size), uint32(size-1)
	for _, s := range old {
		if s != 0 {
			x.slots[x.emptySlot(uint32(s>>32))] = s
		}
	}
}
