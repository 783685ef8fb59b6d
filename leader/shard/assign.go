package shard

import (
	"slices"
	"strings"
)

// score is the rendezvous weight of member for bucket: SplitMix64's
// finaliser over FNV-1a-64(member) combined with the bucket number. FNV
// alone mixes its last bytes poorly, which would make scores of one member
// across buckets correlated and the load uneven; the finaliser spreads
// every input bit over the whole word. Only replicas of one deployment
// must agree on it.
func score(memberHash uint64, bucket int) uint64 {
	z := memberHash ^ (uint64(bucket)+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Assign returns the desired owner of each of buckets buckets among
// members, by bounded-load rendezvous hashing: every (member, bucket) pair
// in decreasing order of score, each bucket goes to the first member in
// that order that has fewer than ⌈buckets/len(members)⌉ buckets. Every
// replica that sees the same members computes the same assignment; a
// member owns at most ⌈buckets/n⌉ buckets; and a membership change moves
// about buckets/n of them. Duplicate members count once; an empty member
// list leaves every owner "". The result has buckets entries.
func Assign(members []string, buckets int) []string {
	owners := make([]string, buckets)
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) == 0 || buckets <= 0 {
		return owners
	}
	type pair struct {
		score  uint64
		member int
		bucket int
	}
	pairs := make([]pair, 0, len(ms)*buckets)
	for i, m := range ms {
		h := fnv1a64(m)
		for b := range buckets {
			pairs = append(pairs, pair{score(h, b), i, b})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		switch {
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case a.member != b.member:
			return strings.Compare(ms[a.member], ms[b.member])
		}
		return a.bucket - b.bucket
	})
	capacity := (buckets + len(ms) - 1) / len(ms)
	load := make([]int, len(ms))
	left := buckets
	for _, p := range pairs {
		if owners[p.bucket] != "" || load[p.member] == capacity {
			continue
		}
		owners[p.bucket] = ms[p.member]
		load[p.member]++
		if left--; left == 0 {
			break
		}
	}
	return owners
}
