package workqueue

import (
	"math"
	"time"
)

// Reasons: with WithReasons, each key the queue holds keeps a small record
// of why it was added, merged on dedup. The queue is the only place that
// sees adds merge, so the records live in its slab, parallel to the
// entries, and are merged under the lock an add takes anyway: no
// allocation and no extra lock per add, and nothing at all without the
// option.

// MaxReasons is how many distinct reasons a key keeps while it is queued.
// The first is never displaced; an add whose reason finds all MaxReasons
// taken by others is counted in Reasons.Dropped.
const MaxReasons = 4

// Reason is one reason a key was added (AddOptions.Reason), and, as
// GetWithReasons and Inspect return it, every add with the same What
// merged since the key was last handed out by Get.
type Reason struct {
	// What says what added the key, in the caller's encoding; the queue
	// only compares it. Zero means no reason: the add records nothing.
	What uint32
	// Rev is a revision the caller attaches (a store revision); merged
	// adds keep the highest.
	Rev uint64
	// First is when the first of the merged adds happened. Set by the
	// queue, and only when it notes times (WithMetrics, WithReadyTimes);
	// zero otherwise.
	First time.Time
	// Count is how many adds were merged into this record. Set by the
	// queue.
	Count uint32
}

// Reasons is a key's reasons: see GetWithReasons. The zero value is empty
// and ready to use; a worker reuses one, so that handing reasons over
// allocates nothing.
type Reasons struct {
	list [MaxReasons]Reason
	n    uint8
	// Dropped counts adds whose reason was not kept: all MaxReasons
	// records held other reasons.
	Dropped uint32
}

// List returns the reasons in the order they first occurred. The slice
// points into r: it is valid until r is reused.
func (r *Reasons) List() []Reason { return r.list[:r.n] }

// Len returns how many reasons r holds.
func (r *Reasons) Len() int { return int(r.n) }

// reasonRec is one reason in the slab; first is in Queue.nanos.
type reasonRec struct {
	what, count uint32
	rev         uint64
	first       int64
}

// reasonSlot is one entry's reasons, parallel to slab.entries.
type reasonSlot struct {
	recs    [MaxReasons]reasonRec
	n       uint8
	dropped uint32
}

// clear empties the slot. Records past n are never read, so it writes two
// fields rather than the slot's 100 bytes.
func (s *reasonSlot) clear() { s.n, s.dropped = 0, 0 }

// merge adds one reason to the slot: same what, counted, with the highest
// rev; a new what, appended if there is room, else dropped.
func (s *reasonSlot) merge(what uint32, rev uint64, now int64) {
	for i := range s.n {
		r := &s.recs[i]
		if r.what == what {
			if r.count < math.MaxUint32 {
				r.count++
			}
			r.rev = max(r.rev, rev)
			return
		}
	}
	if int(s.n) < MaxReasons {
		s.recs[s.n] = reasonRec{what: what, count: 1, rev: rev, first: now}
		s.n++
		return
	}
	if s.dropped < math.MaxUint32 {
		s.dropped++
	}
}

// WithReasons makes every key keep why it was added while it is queued:
// each add given an AddOptions.Reason merges it into the key's record (at
// most MaxReasons distinct reasons, counted and with the highest
// revision), which GetWithReasons hands over and clears, and Inspect
// shows. It costs about 100 bytes per key the queue holds and, per add
// with a reason, a merge into the entry the add has found anyway, under
// the lock the add holds. Default: off; adds' reasons are then ignored.
func WithReasons() Option {
	return func(c *config) { c.reasons = true }
}

// noteReasonAt merges the reason (what, rev) into the record of the entry
// idx that addLocked has just returned (none: the add was ignored); now is
// the add's metricsNow. It does nothing for what 0 or without WithReasons.
// Called with q.mu held.
func (q *Queue[K]) noteReasonAt(idx int32, what uint32, rev uint64, now int64) {
	if what == 0 || idx == none || q.slab.reasons == nil {
		return
	}
	q.slab.reasons[idx].merge(what, rev, now)
}

// GetWithReasons is Get, and also hands over why the key was queued: the
// reasons merged since Get last handed it out (WithReasons), written to
// dst, whose earlier contents are discarded. The key's record is then
// empty, so adds while it is processed make up the next run's reasons.
// Without WithReasons, dst is left empty. Get also clears the record.
func (q *Queue[K]) GetWithReasons(dst *Reasons) (key K, shutdown bool) {
	dst.n, dst.Dropped = 0, 0
	return q.get(dst)
}

// takeReasons moves idx's reasons to dst (if not nil) and clears them;
// the caller holds q.mu.
func (q *Queue[K]) takeReasons(idx int32, dst *Reasons) {
	s := &q.slab.reasons[idx]
	if dst != nil {
		q.copyReasons(s, dst)
	}
	s.clear()
}

// copyReasons writes s to dst; the caller holds q.mu.
func (q *Queue[K]) copyReasons(s *reasonSlot, dst *Reasons) {
	for i := range s.n {
		r := &s.recs[i]
		out := Reason{What: r.what, Rev: r.rev, Count: r.count}
		if q.stamp {
			out.First = q.epoch.Add(time.Duration(r.first))
		}
		dst.list[i] = out
	}
	dst.n, dst.Dropped = s.n, s.dropped
}
