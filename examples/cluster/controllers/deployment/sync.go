package deployment

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// RevisionHistoryAnnotation lists the earlier revisions of a ReplicaSet
// that a rollback brought back (deployment_util.go).
const RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"

// maxRevisionHistoryChars bounds RevisionHistoryAnnotation, as Kubernetes does.
const maxRevisionHistoryChars = 2000

// Reasons of the Progressing condition that the api package does not name.
const ReasonFailedRSCreate = "ReplicaSetCreateError"

// annotationsNotCopied are the Deployment's annotations a ReplicaSet does
// not inherit (deployment_util.go annotationsToSkip).
var annotationsNotCopied = map[string]bool{
	"kubectl.kubernetes.io/last-applied-configuration": true,
	api.RevisionAnnotation:                             true,
	RevisionHistoryAnnotation:                          true,
	api.DesiredReplicasAnnotation:                      true,
	api.MaxReplicasAnnotation:                          true,
}

// newAndOld splits d's ReplicaSets into the one of its template (the
// oldest such, nil if none) and the others (deployment_util.go
// FindNewReplicaSet, FindOldReplicaSets).
func (s *pass) newAndOld() (*api.ReplicaSet, []*api.ReplicaSet) {
	var newRS *api.ReplicaSet
	var old []*api.ReplicaSet
	for _, rs := range s.rsList { // oldest first
		if newRS == nil && equalIgnoreHash(rs.Spec.Template, s.d.Spec.Template) {
			newRS = rs
			continue
		}
		old = append(old, rs)
	}
	return newRS, old
}

// newReplicaSet returns d's ReplicaSet for its current template with its
// annotations synced, creating it if create is set and there is none
// (sync.go getNewReplicaSet), and the old ones. It also sets d's revision
// annotation and, for a new ReplicaSet, the Progressing condition.
func (s *pass) newReplicaSet(create bool) (*api.ReplicaSet, []*api.ReplicaSet, error) {
	d := s.d
	newRS, old := s.newAndOld()
	var maxOld int64
	for _, rs := range old {
		maxOld = max(maxOld, revision(rs))
	}
	newRevision := strconv.FormatInt(maxOld+1, 10)
	if newRS != nil {
		annotations, changed := s.newRSAnnotations(newRS, newRevision, true)
		if changed || newRS.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			if err := s.updateRS(newRS, func(rs *api.ReplicaSet) {
				rs.Annotations = annotations
				rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			}); err != nil {
				return nil, nil, err
			}
		}
		s.setRevision(newRS.Annotations[api.RevisionAnnotation])
		if _, ok := object.FindCondition(d.Status.Conditions, api.DeploymentProgressing); !ok {
			s.setProgressing(object.ConditionTrue, api.ReasonFoundNewReplicaSet,
				fmt.Sprintf("Found new replica set %q", newRS.Name))
		}
		return newRS, old, nil
	}
	if !create {
		return nil, old, nil
	}

	hash := ComputeHash(d.Spec.Template, 0)
	rs := api.ReplicaSet{Spec: api.ReplicaSetSpec{
		MinReadySeconds: d.Spec.MinReadySeconds,
		Selector:        api.LabelSelector{MatchLabels: withLabel(d.Spec.Selector.MatchLabels, api.PodTemplateHashLabel, hash)},
		Template:        d.Spec.Template,
	}}
	rs.Spec.Template.Metadata.Labels = withLabel(d.Spec.Template.Metadata.Labels, api.PodTemplateHashLabel, hash)
	rs.Name, rs.Namespace, rs.UID = d.Name+"-"+hash, d.Namespace, s.uid()
	rs.Labels = rs.Spec.Template.Metadata.Labels
	rs.OwnerReferences = []api.OwnerReference{ControllerRef(*d)}
	rs.CreationTimestamp = s.now.UTC()
	zero := int32(0)
	rs.Spec.Replicas = &zero
	replicas := s.newRSNewReplicas(append(slices.Clip(old), &rs), &rs)
	rs.Spec.Replicas = &replicas
	rs.Annotations, _ = s.newRSAnnotations(&rs, newRevision, false)

	key := rs.Key()
	rev, err := s.rss.Create(s.ctx, key, rs)
	created := err == nil
	if errors.Is(err, informer.ErrConflict) {
		// A slow cache, or a hash collision: ours if it is d's and of d's
		// template.
		got, _, ok, gerr := s.rss.Get(s.ctx, key)
		switch {
		case gerr != nil:
			return nil, nil, gerr
		case ok && isControlledBy(got.Metadata, d.UID) && equalIgnoreHash(got.Spec.Template, d.Spec.Template):
			rs, err = got, nil
		default:
			err = fmt.Errorf("replicaset %s exists and is not this deployment's for this template (a hash collision)", key)
		}
	}
	if err != nil {
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		s.setProgressing(object.ConditionFalse, ReasonFailedRSCreate, msg)
		s.events.Eventf(s.ctx, s.key, events.Warning, EventFailedRSCreate, "%s", msg)
		return nil, nil, errors.Join(fmt.Errorf("deployment %s: %s", s.key, msg), s.write(*d, d.Status))
	}
	reconcile.Wrote(s.ctx, s.rsInf, rev)
	if created && replicas > 0 {
		s.events.Eventf(s.ctx, s.key, events.Normal, EventScalingReplicaSet,
			"Scaled up replica set %s from 0 to %d", rs.Name, replicas)
	}
	s.setRevision(newRevision)
	if created {
		s.setProgressing(object.ConditionTrue, api.ReasonNewReplicaSetCreated,
			fmt.Sprintf("Created new replica set %q", rs.Name))
	}
	s.rsList = append(s.rsList, &rs)
	return &rs, old, nil
}

func isControlledBy(m api.ObjectMeta, uid string) bool {
	ref, ok := api.ControllerOf(m)
	return ok && ref.UID == uid
}

// newRSAnnotations are rs's annotations with d's copied in, its revision
// raised to newRevision if below it (a rollback to rs keeps its earlier
// revisions in RevisionHistoryAnnotation), and, for a ReplicaSet being
// created, the replicas annotations (deployment_util.go
// SetNewReplicaSetAnnotations); and whether they changed.
func (s *pass) newRSAnnotations(rs *api.ReplicaSet, newRevision string, exists bool) (map[string]string, bool) {
	out := maps.Clone(rs.Annotations)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range s.d.Annotations {
		if !annotationsNotCopied[k] {
			out[k] = v
		}
	}
	old, had := out[api.RevisionAnnotation]
	oldN, err := strconv.ParseInt(cmpOr(old, "0"), 10, 64)
	newN, _ := strconv.ParseInt(newRevision, 10, 64)
	if err == nil && oldN < newN {
		out[api.RevisionAnnotation] = newRevision
		if had {
			hist := strings.Join(slices.DeleteFunc(strings.Split(out[RevisionHistoryAnnotation], ","),
				func(s string) bool { return s == "" }), ",")
			if hist == "" {
				hist = old
			} else {
				hist += "," + old
			}
			for len(hist) > maxRevisionHistoryChars {
				_, hist, _ = strings.Cut(hist, ",")
			}
			out[RevisionHistoryAnnotation] = hist
		}
	}
	if !exists {
		out[api.DesiredReplicasAnnotation] = strconv.Itoa(int(api.Replicas(s.d.Spec.Replicas)))
		out[api.MaxReplicasAnnotation] = strconv.Itoa(int(api.Replicas(s.d.Spec.Replicas) + maxSurge(s.d)))
	}
	return out, !maps.Equal(out, rs.Annotations)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// setRevision sets d's revision annotation (deployment_util.go
// SetDeploymentRevision).
func (s *pass) setRevision(rev string) {
	if rev != "" {
		s.d.Annotations, _ = withAnnotation(s.d.Annotations, api.RevisionAnnotation, rev)
	}
}

// updateRS writes ReplicaSet rs with mutate, and applies it to the working
// copy too.
func (s *pass) updateRS(rs *api.ReplicaSet, mutate func(*api.ReplicaSet)) error {
	rev, _, err := informer.Update(s.ctx, s.rss, rs.Key(), func(v *api.ReplicaSet) error {
		if v.UID != rs.UID {
			return errGone
		}
		mutate(v)
		return nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s: update replicaset %s: %w", s.key, rs.Name, err)
	}
	reconcile.Wrote(s.ctx, s.rsInf, rev)
	mutate(rs)
	return nil
}

// scaleRS sets rs's replicas to n and its replicas annotations to d's
// (sync.go scaleReplicaSet): only if n differs, unless force. It reports
// whether the size changed, recording ScalingReplicaSet if so.
func (s *pass) scaleRS(rs *api.ReplicaSet, n int32, force bool) (bool, error) {
	old := api.Replicas(rs.Spec.Replicas)
	if !force && old == n {
		return false, nil
	}
	desired := strconv.Itoa(int(api.Replicas(s.d.Spec.Replicas)))
	maxR := strconv.Itoa(int(api.Replicas(s.d.Spec.Replicas) + maxSurge(s.d)))
	annotations, c1 := withAnnotation(rs.Annotations, api.DesiredReplicasAnnotation, desired)
	annotations, c2 := withAnnotation(annotations, api.MaxReplicasAnnotation, maxR)
	if old == n && !c1 && !c2 {
		return false, nil
	}
	if err := s.updateRS(rs, func(v *api.ReplicaSet) {
		v.Spec.Replicas = &n
		v.Annotations = annotations
	}); err != nil {
		return false, err
	}
	if old == n {
		return false, nil
	}
	dir := "up"
	if n < old {
		dir = "down"
	}
	s.events.Eventf(s.ctx, s.key, events.Normal, EventScalingReplicaSet, "Scaled %s replica set %s from %d to %d", dir, rs.Name, old, n)
	return true, nil
}

// activeRSs are those with replicas (controller.FilterActiveReplicaSets).
func activeRSs(rss []*api.ReplicaSet) []*api.ReplicaSet {
	return slices.DeleteFunc(slices.Clone(rss), func(rs *api.ReplicaSet) bool {
		return rs == nil || api.Replicas(rs.Spec.Replicas) == 0
	})
}

// isScalingEvent: an active ReplicaSet was sized for other replicas than
// d's now (sync.go isScalingEvent).
func (s *pass) isScalingEvent() (bool, error) {
	newRS, old, err := s.newReplicaSet(false)
	if err != nil {
		return false, err
	}
	want := strconv.Itoa(int(api.Replicas(s.d.Spec.Replicas)))
	for _, rs := range activeRSs(append(old, newRS)) {
		if v, ok := rs.Annotations[api.DesiredReplicasAnnotation]; ok && v != want {
			return true, nil
		}
	}
	return false, nil
}

// syncScale scales for a changed replicas count or while paused, cleans
// up a paused Deployment's history, and computes the status (sync.go sync).
func (s *pass) syncScale() (api.DeploymentStatus, error) {
	newRS, old, err := s.newReplicaSet(false)
	if err != nil {
		return api.DeploymentStatus{}, err
	}
	if err := s.scale(newRS, old); err != nil {
		return api.DeploymentStatus{}, err
	}
	if s.d.Spec.Paused {
		if err := s.cleanup(old); err != nil {
			return api.DeploymentStatus{}, err
		}
	}
	return s.calculateStatus(append(old, newRS), newRS), nil
}

// syncStatusOnly is the status of a Deployment being deleted.
func (s *pass) syncStatusOnly() (api.DeploymentStatus, error) {
	newRS, old, err := s.newReplicaSet(false)
	if err != nil {
		return api.DeploymentStatus{}, err
	}
	return s.calculateStatus(append(old, newRS), newRS), nil
}

// scale spreads a change of replicas over the active ReplicaSets in
// proportion to their size (sync.go scale, deployment_util.go
// GetReplicaSetProportion).
func (s *pass) scale(newRS *api.ReplicaSet, old []*api.ReplicaSet) error {
	d := s.d
	replicas := api.Replicas(d.Spec.Replicas)
	active := activeRSs(append(slices.Clip(old), newRS))
	switch {
	case len(active) == 1:
		_, err := s.scaleRS(active[0], replicas, false)
		return err
	case len(active) == 0:
		latest := newRS
		if latest == nil && len(old) > 0 {
			latest = old[len(old)-1] // the newest old one
		}
		if latest == nil {
			return nil
		}
		_, err := s.scaleRS(latest, replicas, false)
		return err
	}
	if isSaturated(d, newRS) {
		for _, rs := range activeRSs(old) {
			if _, err := s.scaleRS(rs, 0, false); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	var total int32
	for _, rs := range active {
		total += api.Replicas(rs.Spec.Replicas)
	}
	allowed := int32(0)
	if replicas > 0 {
		allowed = replicas + maxSurge(d)
	}
	toAdd := allowed - total
	// Larger first; among equals newer first when growing, older first
	// when shrinking (ReplicaSetsBySizeNewer, ReplicaSetsBySizeOlder).
	slices.SortStableFunc(active, func(a, b *api.ReplicaSet) int {
		if c := api.Replicas(b.Spec.Replicas) - api.Replicas(a.Spec.Replicas); c != 0 {
			return int(c)
		}
		c := a.CreationTimestamp.Compare(b.CreationTimestamp)
		if toAdd > 0 {
			return -c
		}
		return c
	})
	sizes := make([]int32, len(active))
	var added int32
	for i, rs := range active {
		sizes[i] = api.Replicas(rs.Spec.Replicas)
		if toAdd != 0 {
			p := s.proportion(rs, toAdd, added)
			sizes[i] += p
			added += p
		}
	}
	for i, rs := range active {
		if i == 0 && toAdd != 0 {
			sizes[0] = max(0, sizes[0]+toAdd-added) // leftovers to the largest
		}
		if _, err := s.scaleRS(rs, sizes[i], true); err != nil {
			return err
		}
	}
	return nil
}

// proportion is rs's share of toAdd, of which added is given out already.
func (s *pass) proportion(rs *api.ReplicaSet, toAdd, added int32) int32 {
	size := api.Replicas(rs.Spec.Replicas)
	if size == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	allowed := toAdd - added
	var fraction int32
	d := s.d
	if api.Replicas(d.Spec.Replicas) == 0 {
		fraction = -size
	} else {
		maxNow := api.Replicas(d.Spec.Replicas) + maxSurge(d)
		before, err := strconv.Atoi(rs.Annotations[api.MaxReplicasAnnotation])
		if err != nil || before <= 0 {
			before = int(d.Status.Replicas)
		}
		if before == 0 {
			return 0
		}
		fraction = int32(math.Round(float64(size*maxNow)/float64(before))) - size
	}
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

// isSaturated: rs has all of d's replicas, sized for them, all available.
func isSaturated(d *api.Deployment, rs *api.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	want := api.Replicas(d.Spec.Replicas)
	desired, err := strconv.Atoi(rs.Annotations[api.DesiredReplicasAnnotation])
	return err == nil && api.Replicas(rs.Spec.Replicas) == want && int32(desired) == want &&
		rs.Status.AvailableReplicas == want
}

// cleanup deletes the oldest revisions of old beyond the history limit,
// only those scaled to zero and settled (sync.go cleanupDeployment).
func (s *pass) cleanup(old []*api.ReplicaSet) error {
	alive := slices.DeleteFunc(slices.Clone(old), func(rs *api.ReplicaSet) bool { return rs.Deleting() })
	diff := len(alive) - int(revisionHistoryLimit(s.d))
	if diff <= 0 {
		return nil
	}
	slices.SortStableFunc(alive, func(a, b *api.ReplicaSet) int { // oldest revision first
		if ra, rb := revision(a), revision(b); ra != rb {
			return int(ra - rb)
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp)
	})
	for _, rs := range alive[:diff] {
		if rs.Status.Replicas != 0 || api.Replicas(rs.Spec.Replicas) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		rev, _, err := informer.RequestDelete(s.ctx, s.rss, rs.Key())
		if err != nil && !errors.Is(err, informer.ErrNotFound) {
			return fmt.Errorf("deployment %s: delete old replicaset %s: %w", s.key, rs.Name, err)
		}
		reconcile.Wrote(s.ctx, s.rsInf, rev)
	}
	return nil
}
