package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/informer"
)

// ListMode is how a Store's List reads its snapshot.
type ListMode uint8

const (
	// ListAuto streams the list (ListStreaming) and, once the server
	// refuses to, lists in pages (ListPaginated) from then on.
	ListAuto ListMode = iota
	// ListPaginated lists with GET requests of a page each, the first a
	// consistent read, the others at its resourceVersion.
	ListPaginated
	// ListStreaming lists with a watch that sends every object first and
	// then a bookmark at the snapshot's resourceVersion (WatchList, on by
	// default since Kubernetes 1.34). A server that cannot (its etcd lacks
	// progress notifications, before 3.4.31 and 3.5.13) fails the List.
	ListStreaming
)

// DefaultPageSize is WithPageSize's default.
const DefaultPageSize = 500

// Option configures a Store.
type Option[V any] func(*options[V])

type options[V any] struct {
	codec         informer.Codec[V]
	namespace     string
	labelSelector string
	fieldSelector string
	transform     func(key string, v *V)
	listMode      ListMode
	pageSize      int
	// protobuf decodes an object's protobuf (WithProtobuf); nil: reads
	// are JSON.
	protobuf func([]byte) (V, error)
	err      error
}

// WithCodec sets how values are encoded and decoded. Default:
// informer.JSON[V]. See the package doc for what the Store adds to and
// takes from the JSON. With WithProtobuf the codec still encodes every
// write and decodes what the server sends as JSON.
func WithCodec[V any](c informer.Codec[V]) Option[V] {
	return func(o *options[V]) {
		if c == nil {
			o.fail(errors.New("kube: WithCodec: nil codec"))
			return
		}
		o.codec = c
	}
}

// WithNamespace confines the Store to one namespace of a namespaced
// resource: its keys are then plain names. Default: all namespaces, keys
// "namespace/name" (cluster-scoped resources: names).
func WithNamespace[V any](ns string) Option[V] {
	return func(o *options[V]) { o.namespace = ns }
}

// WithLabelSelector lists and watches only objects whose labels match sel
// (the API's labelSelector syntax). An object that stops matching is
// watched as deleted. Writes are not filtered. Default: every object.
func WithLabelSelector[V any](sel string) Option[V] {
	return func(o *options[V]) { o.labelSelector = sel }
}

// WithFieldSelector lists and watches only objects whose fields match sel
// (the API's fieldSelector syntax; which fields a resource supports is the
// server's). Default: every object.
func WithFieldSelector[V any](sel string) Option[V] {
	return func(o *options[V]) { o.fieldSelector = sel }
}

// WithTransform sets a function that List and Watch call on every value
// they decoded, before they hand it to the informer: to drop what the cache
// need not keep (managedFields, large fields), as client-go's
// TransformFunc. It must not block. Get does not call it: its value is
// what a write starts from, and a write of a trimmed value would trim the
// object. Default: none.
func WithTransform[V any](f func(key string, v *V)) Option[V] {
	return func(o *options[V]) { o.transform = f }
}

// WithListMode sets how List reads its snapshot. Default: ListAuto.
func WithListMode[V any](m ListMode) Option[V] {
	return func(o *options[V]) {
		if m > ListStreaming {
			o.fail(fmt.Errorf("kube: WithListMode: unknown mode %d", m))
			return
		}
		o.listMode = m
	}
}

// WithPageSize sets the number of objects per page of a paginated List
// (n >= 1); the server's watch cache answers the Store's first List, at
// resourceVersion 0, in one page whatever the size. Default:
// DefaultPageSize.
func WithPageSize[V any](n int) Option[V] {
	return func(o *options[V]) {
		if n < 1 {
			o.fail(fmt.Errorf("kube: WithPageSize: %d, want at least 1", n))
			return
		}
		o.pageSize = n
	}
}

func (o *options[V]) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// Store is an informer.Store over one Kubernetes resource: List and Watch
// follow its objects, Get, Create, Update and Delete read and write them
// with the resourceVersion as the revision. See the package doc for the
// mapping. It is safe for concurrent use.
type Store[V any] struct {
	c    *client
	gvr  schema.GroupVersionResource
	opts options[V]

	// resolved on first use, from discovery
	mu       sync.Mutex
	resolved bool
	res      apiResource
	status   bool // the resource has a status subresource

	// floor is the highest revision the Store has seen: a paginated List
	// asks for a state not older than it.
	floor atomic.Uint64
	// consistentLists makes a paginated List a consistent read from etcd
	// (Locks: a lock another replica took must be listed at once).
	consistentLists bool

	streamingUnsupported atomic.Bool
	streamedLists        atomic.Uint64
	paginatedLists       atomic.Uint64
	decodeErrors         atomic.Uint64
	protobufReads        atomic.Uint64
	jsonReads            atomic.Uint64
}

var _ informer.Store[string, struct{}] = (*Store[struct{}])(nil)

// New returns a Store over the resource gvr of the server cfg points at,
// which it reaches through client-go's transport for cfg (TLS,
// credentials; no client-side rate limit). It asks the server nothing until
// its first call, which looks gvr up in the server's discovery documents
// (its kind, scope and status subresource). Errors: a nil cfg, an empty
// gvr.Version or gvr.Resource, a bad option.
func New[V any](cfg *rest.Config, gvr schema.GroupVersionResource, opts ...Option[V]) (*Store[V], error) {
	if gvr.Version == "" || gvr.Resource == "" {
		return nil, fmt.Errorf("kube: New: resource %q: version and resource are required", gvr.String())
	}
	s := &Store[V]{gvr: gvr, opts: options[V]{pageSize: DefaultPageSize}}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("kube: New: nil option")
		}
		o(&s.opts)
	}
	if s.opts.err != nil {
		return nil, s.opts.err
	}
	if s.opts.codec == nil {
		s.opts.codec = informer.JSON[V]{}
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// seen records rev as seen (if err is nil) and returns its arguments.
func (s *Store[V]) seen(rev informer.Revision, err error) (informer.Revision, error) {
	if err != nil {
		return rev, err
	}
	for {
		old := s.floor.Load()
		if uint64(rev) <= old || s.floor.CompareAndSwap(old, uint64(rev)) {
			return rev, err
		}
	}
}

// Namespace returns the namespace WithNamespace set, "" for all namespaces.
func (s *Store[V]) Namespace() string { return s.opts.namespace }

// Resource returns the resource the Store follows.
func (s *Store[V]) Resource() schema.GroupVersionResource { return s.gvr }

// Stats counts a Store's lists by how they were read, and the values it
// could not decode.
type Stats struct {
	StreamedLists  uint64 // Lists read as a streaming watch
	PaginatedLists uint64 // Lists read in pages
	// StreamingUnsupported: the server refused a streaming list, and
	// ListAuto lists in pages from then on.
	StreamingUnsupported bool
	DecodeErrors         uint64
	// ProtobufReads and JSONReads count the responses of List (a page or
	// a stream each), Watch and Get by the encoding the server sent:
	// JSON only, unless WithProtobuf.
	ProtobufReads, JSONReads uint64
}

// Stats returns the Store's counts so far.
func (s *Store[V]) Stats() Stats {
	return Stats{
		StreamedLists:        s.streamedLists.Load(),
		PaginatedLists:       s.paginatedLists.Load(),
		StreamingUnsupported: s.streamingUnsupported.Load(),
		DecodeErrors:         s.decodeErrors.Load(),
		ProtobufReads:        s.protobufReads.Load(),
		JSONReads:            s.jsonReads.Load(),
	}
}

// resolve looks the resource up in discovery, once it succeeds.
func (s *Store[V]) resolve(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resolved {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kube: %s: %w", s.gvr.Resource, err)
	}
	r, st, err := s.c.resource(ctx, s.gvr)
	if err != nil {
		return err
	}
	if !r.Namespaced && s.opts.namespace != "" {
		return fmt.Errorf("kube: %s is cluster-scoped: WithNamespace(%q) does not apply", s.gvr.Resource, s.opts.namespace)
	}
	s.res, s.status, s.resolved = r, st, true
	return nil
}

// keysHaveNamespace reports whether keys are "namespace/name".
func (s *Store[V]) keysHaveNamespace() bool { return s.res.Namespaced && s.opts.namespace == "" }

// key is an object's key.
func (s *Store[V]) key(m *objectMeta) string {
	if s.keysHaveNamespace() {
		return m.Namespace + "/" + m.Name
	}
	return m.Name
}

// split returns a key's namespace and name.
func (s *Store[V]) split(key string) (ns, name string, err error) {
	switch {
	case !s.res.Namespaced:
		name = key
	case s.opts.namespace != "":
		ns, name = s.opts.namespace, key
	default:
		var ok bool
		ns, name, ok = strings.Cut(key, "/")
		if !ok || ns == "" {
			return "", "", fmt.Errorf("kube: key %q of %s: want namespace/name", key, s.gvr.Resource)
		}
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("kube: key %q of %s: bad name %q", key, s.gvr.Resource, name)
	}
	return ns, name, nil
}

// collectionPath is the path of the resource's objects in ns ("": all
// namespaces, or a cluster-scoped resource).
func (s *Store[V]) collectionPath(ns string) string {
	p := groupVersionPath(s.gvr.GroupVersion())
	if ns != "" {
		p += "/namespaces/" + url.PathEscape(ns)
	}
	return p + "/" + s.gvr.Resource
}

// objectPath is the path of one object.
func (s *Store[V]) objectPath(ns, name string) string {
	return s.collectionPath(ns) + "/" + url.PathEscape(name)
}

// selectors returns the list and watch query with the Store's selectors.
func (s *Store[V]) selectors() url.Values {
	q := url.Values{}
	if s.opts.labelSelector != "" {
		q.Set("labelSelector", s.opts.labelSelector)
	}
	if s.opts.fieldSelector != "" {
		q.Set("fieldSelector", s.opts.fieldSelector)
	}
	return q
}

// accept is the Accept header of a read: protobuf first with
// WithProtobuf.
func (s *Store[V]) accept() string {
	if s.opts.protobuf != nil {
		return acceptProtobuf
	}
	return "application/json"
}

// read counts a response read, by its encoding.
func (s *Store[V]) read(protobuf bool) {
	if protobuf {
		s.protobufReads.Add(1)
	} else {
		s.jsonReads.Add(1)
	}
}

// apiVersion is the apiVersion of the resource's objects.
func (s *Store[V]) apiVersion() string { return s.gvr.GroupVersion().String() }
