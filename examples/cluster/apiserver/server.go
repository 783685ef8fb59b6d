// Package apiserver is the cluster example's control-plane API: every kind's
// store served over HTTP, twice. Under /store/<plural>/ each store speaks
// converge's store protocol (informer/httpstore), which the node agents and
// the CLI use through httpstore clients (NewStores); under Kubernetes'
// own paths each kind is a REST resource with JSON or YAML bodies, for
// curl and for people:
//
//	/apis/apps/v1/namespaces/NS/deployments[/NAME]      (also replicasets)
//	/api/v1/namespaces/NS/pods[/NAME]
//	/api/v1/nodes[/NAME]
//	/apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
//	/api/v1/namespaces/NS/events                        (read only)
//	/apis/apps/v1/deployments, /api/v1/pods, ...         (every namespace)
//
// GET on a collection lists it, or with ?watch=1 streams
// {"type":"ADDED|MODIFIED|DELETED","object":...} lines; with
// ?fieldSelector=spec.nodeName=NODE (or another of Kubernetes' selectable
// fields: metadata.name, metadata.namespace, and for pods spec.nodeName,
// spec.restartPolicy and status.phase) of the matching objects only, an
// object that stops matching being DELETED for the watcher, as it last
// matched, with the resourceVersion of the write that changed it. The store
// protocol takes the same selectors as its selector parameter; POST creates, PUT
// replaces, DELETE deletes with ?propagationPolicy=Background|Foreground|Orphan.
//
// Both paths default and validate a write the same way (api.Default,
// api.Validate): a refused write answers 422 with every problem found and
// writes nothing.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
)

// Options configure a Server.
type Options struct {
	// Tokens maps each bearer token to what it may do (httpstore.ReadOnly
	// or httpstore.ReadWrite). Default (empty): no authentication, for a
	// server only this machine can reach.
	Tokens map[string]httpstore.Access
	// TolerationSeconds is the pods' default not-ready and unreachable
	// toleration (the DefaultTolerationSeconds admission plugin); negative:
	// none. Default: 0 seconds, so set it (api.Timings.DefaultTolerationSeconds).
	TolerationSeconds int64
	// BookmarkInterval is the store protocol's watch bookmark interval.
	// Default: httpstore.DefaultBookmarkInterval.
	BookmarkInterval time.Duration
	// Clock stamps creationTimestamps and drives bookmarks. Default: the
	// real clock.
	Clock clock.WithTicker
}

// Server is the control plane's HTTP API over a Stores. It is an
// http.Handler, safe for concurrent use.
type Server struct {
	mux    *http.ServeMux
	stores api.Stores
	auth   map[string]httpstore.Access
}

// Stores returns the stores a Server admits writes to: st's, each Create
// and Update defaulted and validated (see Admitted). Give them to the
// control plane's controllers, so that their writes get the same rules as
// the API's.
func (s *Server) Stores() api.Stores { return s.stores }

// New returns a Server over st with opts, or an error if opts cannot work
// (an empty token, a negative interval).
func New(st api.Stores, opts Options) (*Server, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	adm := admission{tolerationSeconds: opts.TolerationSeconds, clock: opts.Clock}
	s := &Server{mux: http.NewServeMux(), stores: Admitted(st, opts.TolerationSeconds, opts.Clock), auth: opts.Tokens}
	var errs []error
	errs = append(errs, mountStore(s, "deployments", s.stores.Deployments, adm, opts))
	errs = append(errs, mountStore(s, "replicasets", s.stores.ReplicaSets, adm, opts))
	errs = append(errs, mountStore(s, "pods", s.stores.Pods, adm, opts))
	errs = append(errs, mountStore(s, "nodes", s.stores.Nodes, adm, opts))
	errs = append(errs, mountStore(s, "leases", s.stores.Leases, adm, opts))
	errs = append(errs, mountStore(s, "events", s.stores.Events, adm, opts))

	mountREST(s, &resource[api.Deployment]{kind: api.KindDeployment, prefix: "/apis/apps/v1", plural: "deployments", namespaced: true, store: s.stores.Deployments, del: deleter(s.stores.Deployments, opts.Clock)})
	mountREST(s, &resource[api.ReplicaSet]{kind: api.KindReplicaSet, prefix: "/apis/apps/v1", plural: "replicasets", namespaced: true, store: s.stores.ReplicaSets, del: deleter(s.stores.ReplicaSets, opts.Clock)})
	mountREST(s, &resource[api.Pod]{kind: api.KindPod, prefix: "/api/v1", plural: "pods", namespaced: true, store: s.stores.Pods, del: deleter(s.stores.Pods, opts.Clock)})
	mountREST(s, &resource[api.Node]{kind: api.KindNode, prefix: "/api/v1", plural: "nodes", store: s.stores.Nodes, del: deleter(s.stores.Nodes, opts.Clock)})
	mountREST(s, &resource[api.Lease]{kind: api.KindLease, prefix: "/apis/coordination.k8s.io/v1", plural: "leases", namespaced: true, store: s.stores.Leases, del: deleter(s.stores.Leases, opts.Clock)})
	mountREST(s, &resource[events.Event]{kind: "Event", prefix: "/api/v1", plural: "events", namespaced: true, readOnly: true, store: s.stores.Events,
		namespaceOf: func(e *events.Event) string { ns, _ := api.SplitKey(e.Key); return ns }})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("apiserver.New: %w", err)
	}
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// mountStore serves st's store protocol under /store/<plural>/, with the
// kind's admission as httpstore's hooks, so that a refused write is a 422.
func mountStore[V any](s *Server, plural string, st informer.Store[string, V], adm admission, opts Options) error {
	so := httpstore.ServerOptions[V]{Tokens: opts.Tokens, BookmarkInterval: opts.BookmarkInterval, Clock: opts.Clock}
	var zero V
	if api.MetaOf(&zero) != nil {
		// Default only names and fills in; Validate refuses, from the
		// same admit the stores run again (a no-op the second time).
		so.Default = func(_ context.Context, key string, v V) V {
			d, _ := admit(adm, key, v)
			return d
		}
		so.Validate = func(_ context.Context, key string, v V) error {
			_, err := admit(adm, key, v)
			return err
		}
		// The store protocol's selector is a field selector, so that an
		// agent asks for its node's pods only.
		so.Select = func(selector string) (func(string, V) bool, error) {
			match, err := fieldMatcher[V](selector)
			if err != nil {
				return nil, err
			}
			return func(_ string, v V) bool { return match(&v) }, nil
		}
	}
	srv, err := httpstore.NewServer(st, so)
	if err != nil {
		return err
	}
	s.mux.Handle("/store/"+plural+"/", http.StripPrefix("/store/"+plural, srv))
	return nil
}
