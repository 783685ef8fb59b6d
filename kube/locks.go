package kube

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/leader"
)

// Label and annotation of the Leases of a Locks.
const (
	// LocksLabel is set to the Locks' root on each of its Leases, so that
	// List reads them with one label selector.
	LocksLabel = "converge.dev/locks"
	// NameAnnotation holds the lock's name, which a Lease's name can only
	// approximate (Lease names are DNS subdomains: no "/", no capitals).
	NameAnnotation = "converge.dev/name"
)

// rootPattern is what a Locks' root must be: a DNS label short enough to
// prefix Lease names, and a valid label value.
var rootPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// Locks is a set of Locks over the Leases of one namespace, for
// leader/shard: the lock called name is the Lease named after root and
// name (lowercased, characters other than letters and digits made "-",
// and a hash of name to keep distinct names apart), labelled LocksLabel=root
// and annotated with its name. It is safe for concurrent use.
type Locks struct {
	s               *Store[lease]
	namespace, root string
}

// NewLocks returns the set of Locks on the Leases of namespace labelled
// root: a lowercase DNS label of at most 40 characters. Errors: a nil cfg,
// an empty namespace, a bad root.
func NewLocks(cfg *rest.Config, namespace, root string) (*Locks, error) {
	if namespace == "" {
		return nil, errors.New("kube: NewLocks: empty namespace")
	}
	if !rootPattern.MatchString(root) {
		return nil, fmt.Errorf("kube: NewLocks: root %q: want a lowercase DNS label of at most 40 characters", root)
	}
	s, err := New[lease](cfg, leasesGVR, WithNamespace[lease](namespace), WithLabelSelector[lease](LocksLabel+"="+root))
	if err != nil {
		return nil, err
	}
	s.consistentLists = true
	return &Locks{s: s, namespace: namespace, root: root}, nil
}

// leaseName is the Lease of the lock called name.
func (s *Locks) leaseName(name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	var b strings.Builder
	b.WriteString(s.root)
	b.WriteByte('-')
	for _, c := range strings.ToLower(name) {
		if b.Len() >= 200 {
			break
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	fmt.Fprintf(&b, "-%016x", h.Sum64())
	return b.String()
}

// Lock returns the Lock called name.
func (s *Locks) Lock(name string) leader.Lock {
	return &Lock{
		s: s.s, namespace: s.namespace, name: s.leaseName(name),
		labels:      map[string]string{LocksLabel: s.root},
		annotations: map[string]string{NameAnnotation: name},
	}
}

// List returns the record of every lock whose name starts with prefix, by
// name, from one list of the root's Leases.
func (s *Locks) List(ctx context.Context, prefix string) (map[string]leader.Record, error) {
	entries, _, err := s.s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube:leases/%s/%s*: list: %w", s.namespace, s.root, err)
	}
	out := map[string]leader.Record{}
	for _, e := range entries {
		if e.Err != nil {
			return nil, fmt.Errorf("kube:leases/%s/%s*: list: %w", s.namespace, s.root, e.Err)
		}
		name, ok := e.Value.Metadata.Annotations[NameAnnotation]
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		l := s.Lock(name).(*Lock)
		r, err := l.record(e.Value, e.Revision)
		if err != nil {
			return nil, err
		}
		out[name] = r
	}
	return out, nil
}

// Delete removes the Lease of the lock called name if it is still at
// version: leader.ErrConflict if it is not, nil if there is none.
func (s *Locks) Delete(ctx context.Context, name string, version int64) error {
	if version <= 0 {
		return fmt.Errorf("kube:lease/%s/%s: delete at version %d: %w", s.namespace, s.leaseName(name), version, leader.ErrConflict)
	}
	_, err := s.s.Delete(ctx, s.leaseName(name), informer.Revision(version))
	switch {
	case errors.Is(err, errGone):
		return nil
	case errors.Is(err, informer.ErrConflict):
		return fmt.Errorf("kube:lease/%s/%s: %w: %w", s.namespace, s.leaseName(name), leader.ErrConflict, err)
	}
	return err
}
