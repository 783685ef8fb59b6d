package shard

import (
	"slices"
	"time"

	"github.com/converge-go/converge/leader"
)

// members is one replica's view of who takes part, judged as an elector
// judges a lease: by the local time at which each record's current Version
// was first seen, never by the timestamps in it (see leader's package doc).
// The view only decides who should own which bucket; it never makes a
// replica act on a bucket it does not hold.
type members struct {
	// seen maps a member's identity to its record's last Version and the
	// local time that Version was first seen.
	seen map[string]sighting
}

type sighting struct {
	version int64
	at      time.Time
	left    bool // the holder is empty: the member released its record
}

// observe folds in a listing of member records (identity → record) made
// at now; members missing from it are forgotten.
func (m *members) observe(recs map[string]leader.Record, now time.Time) {
	next := make(map[string]sighting, len(recs))
	for id, r := range recs {
		s, ok := m.seen[id]
		if !ok || s.version != r.Version {
			s = sighting{version: r.Version, at: now}
		}
		s.left = r.HolderIdentity == ""
		next[id] = s
	}
	m.seen = next
}

// within returns, sorted, the members whose record changed less than d ago
// by the local clock and was not released, plus self, which takes part as
// long as it runs whatever the store says.
func (m *members) within(d time.Duration, now time.Time, self string) []string {
	out := []string{self}
	for id, s := range m.seen {
		if id != self && !s.left && now.Sub(s.at) < d {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// stale returns the members other than self whose record has been
// unchanged for d by the local clock, with the Version last seen.
func (m *members) stale(d time.Duration, now time.Time, self string) map[string]int64 {
	out := make(map[string]int64)
	for id, s := range m.seen {
		if id != self && now.Sub(s.at) >= d {
			out[id] = s.version
		}
	}
	return out
}
