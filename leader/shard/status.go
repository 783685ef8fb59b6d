package shard

import (
	"errors"
	"fmt"
	"slices"
)

// Status is a snapshot of a Sharder, for health pages, metrics and logs.
type Status struct {
	// Identity is this replica's identity.
	Identity string
	// Buckets is the number of buckets.
	Buckets int
	// Members are the members this replica counts as live (itself
	// included), sorted; Suspects those of them whose record has not
	// changed for SuspectAfter.
	Members, Suspects []string
	// Held are the buckets this replica holds, with their epochs, by ID,
	// including those being given up.
	Held []Bucket
	// Releasing are the IDs of held buckets being given up (draining
	// before the release), sorted.
	Releasing []int
	// Campaigning are the IDs of buckets this replica wants but does not
	// hold yet, sorted.
	Campaigning []int
}

// Status returns a snapshot of the Sharder's state.
func (s *Sharder) Status() Status {
	s.mu.Lock()
	st := Status{
		Identity: s.cfg.Identity, Buckets: s.cfg.Buckets,
		Members: slices.Clone(s.live), Suspects: slices.Clone(s.suspects),
	}
	runs := make([]*bucketRun, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	slices.SortFunc(runs, func(a, b *bucketRun) int { return a.id - b.id })
	for _, r := range runs {
		b, holding, revoked := r.state()
		switch {
		case holding:
			st.Held = append(st.Held, b)
			if revoked {
				st.Releasing = append(st.Releasing, b.ID)
			}
		case !revoked && !r.finished():
			st.Campaigning = append(st.Campaigning, r.id)
		}
	}
	return st
}

// Check is a health check: it returns an error naming every bucket whose
// Handlers still run more than RenewDeadline after the bucket's lease was
// last renewed (leader.Elector.Check): a wedged Sharder, or Handlers that
// ignore a lost lease. Otherwise it returns nil.
func (s *Sharder) Check() error {
	s.mu.Lock()
	runs := make([]*bucketRun, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	var errs []error
	for _, r := range runs {
		if err := r.elector.Check(); err != nil {
			errs = append(errs, fmt.Errorf("bucket %d: %w", r.id, err))
		}
	}
	return errors.Join(errs...)
}
