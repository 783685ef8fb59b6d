package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/leader"
)

// Annotations of a Lease that a Lock writes besides its spec.
const (
	// TermAnnotation holds the leader.Term of the holder's term (decimal):
	// the fencing token, written in the same PUT as the spec, so that a
	// Lease's term and holder never disagree. leaseTransitions alone is
	// not one: it counts holder changes only, and another client may
	// write it.
	TermAnnotation = "converge.dev/term"
	// LeaseDurationAnnotation holds the exact lease duration (a Go
	// duration), which spec.leaseDurationSeconds rounds up to whole
	// seconds.
	LeaseDurationAnnotation = "converge.dev/lease-duration"
	// ReplacesAnnotation holds the resourceVersion an Update replaced:
	// the server does not write a PUT that changes nothing, and every
	// Update of a leader.Lock must give a new Version.
	ReplacesAnnotation = "converge.dev/replaces"
)

var leasesGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// microTime is metav1.MicroTime's JSON format.
const microTime = "2006-01-02T15:04:05.000000Z07:00"

// lease is a coordination.k8s.io/v1 Lease as a Lock reads and writes it.
type lease struct {
	Metadata struct {
		// UID, in a PUT, is a precondition: a Lease must not be created by
		// an Update (a PUT of an absent Lease creates it otherwise).
		UID         string            `json:"uid,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		HolderIdentity       *string `json:"holderIdentity,omitempty"`
		LeaseDurationSeconds *int32  `json:"leaseDurationSeconds,omitempty"`
		AcquireTime          *string `json:"acquireTime,omitempty"`
		RenewTime            *string `json:"renewTime,omitempty"`
		LeaseTransitions     *int32  `json:"leaseTransitions,omitempty"`
	} `json:"spec"`
}

// Lock is a leader.Lock over one coordination.k8s.io/v1 Lease, the object
// Kubernetes components elect their leaders with, so that `kubectl get
// lease` and client-go's tools read it as usual: spec.holderIdentity,
// leaseDurationSeconds, acquireTime and renewTime are the Record's, and
// leaseTransitions is the term minus one (the number of terms before this
// one). The Record's Term is in the annotation TermAnnotation, written in
// the same PUT; Version is the Lease's resourceVersion, so every Update is
// a compare-and-swap on it. A Lease that a client-go elector wrote (no term
// annotation) reads as term leaseTransitions+1.
//
// A Lock's writes replace the Lease's annotations with its own. It is safe
// for concurrent use.
type Lock struct {
	s               *Store[lease]
	namespace, name string
	// labels and annotations are written into the Lease besides the
	// Lock's own annotations (Locks names its Leases with them).
	labels, annotations map[string]string

	mu  sync.Mutex
	uid string // of the Lease last read: the precondition of an Update
}

var _ leader.Lock = (*Lock)(nil)

// NewLock returns a Lock over the Lease name in namespace, on the server cfg
// points at. The Lease need not exist (Create makes it). Errors: a nil
// cfg, an empty namespace or name.
func NewLock(cfg *rest.Config, namespace, name string) (*Lock, error) {
	if namespace == "" || name == "" {
		return nil, fmt.Errorf("kube: NewLock: namespace %q and name %q must not be empty", namespace, name)
	}
	s, err := New[lease](cfg, leasesGVR, WithNamespace[lease](namespace))
	if err != nil {
		return nil, err
	}
	return &Lock{s: s, namespace: namespace, name: name}, nil
}

// lease is the Lease that holds r, with the Lock's labels and annotations.
func (l *Lock) lease(r leader.Record) lease {
	v := toLease(r)
	v.Metadata.Labels = l.labels
	for k, a := range l.annotations {
		v.Metadata.Annotations[k] = a
	}
	return v
}

// Describe names the Lease: "kube:lease/NAMESPACE/NAME".
func (l *Lock) Describe() string { return "kube:lease/" + l.namespace + "/" + l.name }

// Get returns the Lease's record, or leader.ErrNotFound.
func (l *Lock) Get(ctx context.Context) (leader.Record, error) {
	v, rev, ok, err := l.s.Get(ctx, l.name)
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: %w", l.Describe(), err)
	}
	if !ok {
		return leader.Record{}, fmt.Errorf("%s: %w", l.Describe(), leader.ErrNotFound)
	}
	l.setUID(v.Metadata.UID)
	return l.record(v, rev)
}

func (l *Lock) setUID(uid string) {
	l.mu.Lock()
	l.uid = uid
	l.mu.Unlock()
}

// uidAt returns the uid of the Lease at version, reading the Lease unless
// the last one read is known: ErrConflict if the Lease is gone or at
// another version.
func (l *Lock) uidAt(ctx context.Context, version int64) (string, error) {
	l.mu.Lock()
	uid := l.uid
	l.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	v, rev, ok, err := l.s.Get(ctx, l.name)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", l.Describe(), err)
	case !ok:
		return "", fmt.Errorf("%s: no Lease to update: %w", l.Describe(), leader.ErrConflict)
	case int64(rev) != version:
		return "", fmt.Errorf("%s: the Lease is at version %d, not %d: %w", l.Describe(), rev, version, leader.ErrConflict)
	}
	l.setUID(v.Metadata.UID)
	return v.Metadata.UID, nil
}

// Create creates the Lease with r, or returns leader.ErrConflict if it
// exists. The Lease's uid, which every Update has as a precondition, is
// learnt by the next Get, or by the first Update.
func (l *Lock) Create(ctx context.Context, r leader.Record) (leader.Record, error) {
	rev, err := l.s.Create(ctx, l.name, l.lease(r))
	l.setUID("")
	return l.stored(r, rev, err)
}

// Update writes r if the Lease is still at old.Version, or returns
// leader.ErrConflict.
func (l *Lock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	if old.Version <= 0 {
		return leader.Record{}, fmt.Errorf("%s: update from version %d: %w", l.Describe(), old.Version, leader.ErrConflict)
	}
	uid, err := l.uidAt(ctx, old.Version)
	if err != nil {
		return leader.Record{}, err
	}
	v := l.lease(r)
	v.Metadata.UID = uid
	v.Metadata.Annotations[ReplacesAnnotation] = strconv.FormatInt(old.Version, 10)
	rev, err := l.s.Update(ctx, l.name, v, informer.Revision(old.Version))
	return l.stored(r, rev, err)
}

// stored is a write's result: r at revision rev, or the write's error.
func (l *Lock) stored(r leader.Record, rev informer.Revision, err error) (leader.Record, error) {
	if errors.Is(err, informer.ErrConflict) {
		return leader.Record{}, fmt.Errorf("%s: %w: %w", l.Describe(), leader.ErrConflict, err)
	}
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: %w", l.Describe(), err)
	}
	if rev > math.MaxInt64 {
		return leader.Record{}, fmt.Errorf("%s: resourceVersion %d does not fit a Version", l.Describe(), rev)
	}
	r.Version = int64(rev)
	return r, nil
}

// toLease is the Lease that holds r.
func toLease(r leader.Record) lease {
	var v lease
	v.Metadata.Annotations = map[string]string{
		TermAnnotation:          strconv.FormatUint(uint64(r.Term), 10),
		LeaseDurationAnnotation: r.LeaseDuration.String(),
	}
	if r.HolderIdentity != "" {
		v.Spec.HolderIdentity = &r.HolderIdentity
	}
	secs := int32(min(math.Ceil(r.LeaseDuration.Seconds()), math.MaxInt32))
	v.Spec.LeaseDurationSeconds = &secs
	if !r.AcquireTime.IsZero() {
		s := r.AcquireTime.UTC().Format(microTime)
		v.Spec.AcquireTime = &s
	}
	if !r.RenewTime.IsZero() {
		s := r.RenewTime.UTC().Format(microTime)
		v.Spec.RenewTime = &s
	}
	transitions := int32(0)
	if r.Term > 0 {
		transitions = int32(min(uint64(r.Term)-1, math.MaxInt32))
	}
	v.Spec.LeaseTransitions = &transitions
	return v
}

// record reads a Lease at revision rev.
func (l *Lock) record(v lease, rev informer.Revision) (leader.Record, error) {
	r := leader.Record{Version: int64(rev)}
	if rev > math.MaxInt64 {
		return leader.Record{}, fmt.Errorf("%s: resourceVersion %d does not fit a Version", l.Describe(), rev)
	}
	if v.Spec.HolderIdentity != nil {
		r.HolderIdentity = *v.Spec.HolderIdentity
	}
	if a, ok := v.Metadata.Annotations[TermAnnotation]; ok {
		t, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return leader.Record{}, fmt.Errorf("%s: annotation %s=%q: %w", l.Describe(), TermAnnotation, a, err)
		}
		r.Term = leader.Term(t)
	} else if v.Spec.LeaseTransitions != nil && *v.Spec.LeaseTransitions >= 0 {
		r.Term = leader.Term(*v.Spec.LeaseTransitions) + 1
	}
	if a, ok := v.Metadata.Annotations[LeaseDurationAnnotation]; ok {
		d, err := time.ParseDuration(a)
		if err != nil {
			return leader.Record{}, fmt.Errorf("%s: annotation %s=%q: %w", l.Describe(), LeaseDurationAnnotation, a, err)
		}
		r.LeaseDuration = d
	} else if v.Spec.LeaseDurationSeconds != nil {
		r.LeaseDuration = time.Duration(*v.Spec.LeaseDurationSeconds) * time.Second
	}
	for _, f := range []struct {
		s   *string
		dst *time.Time
	}{{v.Spec.AcquireTime, &r.AcquireTime}, {v.Spec.RenewTime, &r.RenewTime}} {
		if f.s == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, *f.s)
		if err != nil {
			return leader.Record{}, fmt.Errorf("%s: time %q: %w", l.Describe(), *f.s, err)
		}
		*f.dst = t
	}
	return r, nil
}
