package apiserver

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
)

// resource is one kind served at Kubernetes' paths.
type resource[V any] struct {
	kind, prefix, plural string
	namespaced, readOnly bool
	store                informer.Store[string, V]
	// del deletes with a propagation policy (api.Delete).
	del func(ctx context.Context, key, policy string) error
	// namespaceOf returns a value's namespace; default: its metadata's.
	namespaceOf func(*V) string
}

func deleter[V any](st informer.ReadWriter[string, V], c clock.PassiveClock) func(ctx context.Context, key, policy string) error {
	return func(ctx context.Context, key, policy string) error { return api.Delete(ctx, st, key, policy, c.Now) }
}

// maxBody bounds a REST write's body, as httpstore bounds the protocol's.
const maxBody = httpstore.DefaultMaxBodyBytes

func mountREST[V any](s *Server, r *resource[V]) {
	if r.namespaceOf == nil {
		r.namespaceOf = func(v *V) string { return api.MetaOf(v).Namespace }
	}
	all := r.prefix + "/" + r.plural
	s.mux.HandleFunc("GET "+all, s.guard(false, func(w http.ResponseWriter, req *http.Request) { r.list(w, req, "") }))
	coll := all
	if r.namespaced {
		coll = r.prefix + "/namespaces/{ns}/" + r.plural
		s.mux.HandleFunc("GET "+coll, s.guard(false, func(w http.ResponseWriter, req *http.Request) { r.list(w, req, req.PathValue("ns")) }))
	}
	if r.readOnly {
		return
	}
	s.mux.HandleFunc("POST "+coll, s.guard(true, r.create))
	s.mux.HandleFunc("GET "+coll+"/{name}", s.guard(false, r.get))
	s.mux.HandleFunc("PUT "+coll+"/{name}", s.guard(true, r.replace))
	s.mux.HandleFunc("DELETE "+coll+"/{name}", s.guard(true, r.delete))
}

// guard answers 401 to a request without a known bearer token, and 403 to
// a read-only token's write, before h runs.
func (s *Server) guard(write bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(s.auth) > 0 {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			var access httpstore.Access
			known := false
			for t, a := range s.auth { // in constant time per token, as httpstore compares
				if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
					access, known = a, true
				}
			}
			switch {
			case !ok || !known:
				writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized: a bearer token the server knows is required")
				return
			case write && access != httpstore.ReadWrite:
				writeStatus(w, http.StatusForbidden, "Forbidden", "Forbidden: this token may only read")
				return
			}
		}
		h(w, r)
	}
}

func (r *resource[V]) key(req *http.Request) string {
	return api.Key(req.PathValue("ns"), req.PathValue("name"))
}

func (r *resource[V]) what(name string) string {
	group := ""
	if g, _, ok := strings.Cut(api.APIVersions[r.kind], "/"); ok {
		group = "." + g
	}
	return fmt.Sprintf("%s%s %q", r.plural, group, name)
}

// selects returns whether a value is in the request's namespace ns (any,
// if empty) and matches its fieldSelector. It answers 400 and returns
// false for a field selector the kind cannot take.
func (r *resource[V]) selects(w http.ResponseWriter, req *http.Request, ns string) (func(*V) bool, bool) {
	match, err := fieldMatcher[V](req.URL.Query().Get("fieldSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return nil, false
	}
	return func(v *V) bool { return (ns == "" || r.namespaceOf(v) == ns) && match(v) }, true
}

func (r *resource[V]) list(w http.ResponseWriter, req *http.Request, ns string) {
	selects, ok := r.selects(w, req, ns)
	if !ok {
		return
	}
	if w1 := req.URL.Query().Get("watch"); w1 == "1" || w1 == "true" {
		r.watch(w, req, selects)
		return
	}
	entries, rev, err := r.store.List(req.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	items := []map[string]any{}
	for _, e := range entries {
		if e.Err != nil || !selects(&e.Value) {
			continue
		}
		items = append(items, r.render(e.Value, e.Revision))
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": r.kind + "List", "apiVersion": r.version(),
		"metadata": map[string]string{"resourceVersion": strconv.FormatUint(uint64(rev), 10)}, "items": items})
}

func (r *resource[V]) version() string {
	if v, ok := api.APIVersions[r.kind]; ok {
		return v
	}
	return "v1"
}

// render returns v as the API shows it: with kind, apiVersion and
// metadata.resourceVersion.
func (r *resource[V]) render(v V, rev informer.Revision) map[string]any {
	b, _ := json.Marshal(v)
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	out["kind"], out["apiVersion"] = r.kind, r.version()
	if md, ok := out["metadata"].(map[string]any); ok {
		md["resourceVersion"] = strconv.FormatUint(uint64(rev), 10)
	}
	return out
}

func (r *resource[V]) get(w http.ResponseWriter, req *http.Request) {
	v, rev, ok, err := r.store.Get(req.Context(), r.key(req))
	switch {
	case err != nil:
		writeError(w, err)
	case !ok:
		writeStatus(w, http.StatusNotFound, "NotFound", r.what(req.PathValue("name"))+" not found")
	default:
		writeJSON(w, http.StatusOK, r.render(v, rev))
	}
}

// decode reads a write's body, JSON or YAML, strictly (api.Decode): one
// object of this kind, in the namespace of the path.
func (r *resource[V]) decode(w http.ResponseWriter, req *http.Request) (*V, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		writeStatus(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the request body is too large or unreadable: "+err.Error())
		return nil, false
	}
	docs, err := api.Decode(body)
	if err == nil && len(docs) != 1 {
		err = fmt.Errorf("want one object, got %d", len(docs))
	}
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return nil, false
	}
	v, ok := docs[0].Object.(*V)
	if !ok {
		writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("the body is a %s, the path is for %s", docs[0].Kind, r.plural))
		return nil, false
	}
	m := api.MetaOf(v)
	ns := req.PathValue("ns")
	if m.Namespace == "" {
		m.Namespace = ns
	}
	if m.Namespace != ns {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
		return nil, false
	}
	return v, true
}

func (r *resource[V]) create(w http.ResponseWriter, req *http.Request) {
	v, ok := r.decode(w, req)
	if !ok {
		return
	}
	key := api.MetaOf(v).Key()
	if _, err := r.store.Create(req.Context(), key, *v); err != nil {
		if errors.Is(err, informer.ErrConflict) {
			writeStatus(w, http.StatusConflict, "AlreadyExists", r.what(api.MetaOf(v).Name)+" already exists")
			return
		}
		writeError(w, err)
		return
	}
	r.respond(w, req, key, http.StatusCreated)
}

// replace writes the body over the object, at the revision
// ?resourceVersion= names or else the one it reads; the status stays the
// stored one, as a PUT of the main resource leaves the status subresource.
func (r *resource[V]) replace(w http.ResponseWriter, req *http.Request) {
	v, ok := r.decode(w, req)
	if !ok {
		return
	}
	if name := req.PathValue("name"); api.MetaOf(v).Name != name {
		writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", api.MetaOf(v).Name, name))
		return
	}
	key := r.key(req)
	old, rev, found, err := r.store.Get(req.Context(), key)
	if err == nil && !found {
		err = fmt.Errorf("%s: %w", key, informer.ErrNotFound)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if rv := req.URL.Query().Get("resourceVersion"); rv != "" {
		n, perr := strconv.ParseUint(rv, 10, 64)
		if perr != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", "resourceVersion: want a number")
			return
		}
		rev = informer.Revision(n)
	}
	keepStatus(v, &old)
	if _, err := r.store.Update(req.Context(), key, *v, rev); err != nil {
		writeError(w, err)
		return
	}
	r.respond(w, req, key, http.StatusOK)
}

// keepStatus copies old's status into v.
func keepStatus(v, old any) {
	switch o := old.(type) {
	case *api.Deployment:
		v.(*api.Deployment).Status = o.Status
	case *api.ReplicaSet:
		v.(*api.ReplicaSet).Status = o.Status
	case *api.Pod:
		v.(*api.Pod).Status = o.Status
	case *api.Node:
		v.(*api.Node).Status = o.Status
	}
}

func (r *resource[V]) respond(w http.ResponseWriter, req *http.Request, key string, code int) {
	v, rev, ok, err := r.store.Get(req.Context(), key)
	if err != nil || !ok {
		writeJSON(w, code, map[string]any{"kind": r.kind, "apiVersion": r.version()})
		return
	}
	writeJSON(w, code, r.render(v, rev))
}

func (r *resource[V]) delete(w http.ResponseWriter, req *http.Request) {
	key := r.key(req)
	if err := r.del(req.Context(), key, req.URL.Query().Get("propagationPolicy")); err != nil {
		if errors.Is(err, informer.ErrNotFound) {
			writeStatus(w, http.StatusNotFound, "NotFound", r.what(req.PathValue("name"))+" not found")
			return
		}
		if errors.Is(err, api.ErrPropagationPolicy) {
			writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success",
		"details": map[string]string{"name": req.PathValue("name"), "kind": r.plural}})
}

// watch lists the selected part of the collection as ADDED events, then
// streams its changes, a JSON line each, until the client goes away or the
// store's watch fails: an object that comes to be selected is ADDED, one
// that no longer is (deleted, or a field changed) DELETED, as Kubernetes'
// watch cache sends them (staging/src/k8s.io/apiserver/pkg/storage/cacher/
// cache_watcher.go, convertToWatchEvent). A DELETED event carries the
// object as it last matched, with the resourceVersion of the write that
// made it leave, so that a client resuming from that version skips the
// write and a client that filters on the field still recognises the object.
// The watch holds the last matching state of each selected object for that.
func (r *resource[V]) watch(w http.ResponseWriter, req *http.Request, selects func(*V) bool) {
	ctx := req.Context()
	entries, rev, err := r.store.List(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	seen := map[string]V{} // the selected objects, as they last matched
	send := func(typ string, obj any) error {
		b, _ := json.Marshal(map[string]any{"type": typ, "object": obj})
		if _, err := bw.Write(append(b, '\n')); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	for _, e := range entries {
		if e.Err == nil && selects(&e.Value) {
			seen[e.Key] = e.Value
			if send("ADDED", r.render(e.Value, e.Revision)) != nil {
				return
			}
		}
	}
	err = r.store.Watch(ctx, rev, func(ev informer.Event[string, V]) error {
		switch {
		case ev.Err != nil || (ev.Type != informer.Put && ev.Type != informer.Delete):
			return nil
		case ev.Type == informer.Put && selects(&ev.Value):
			typ := "MODIFIED"
			if _, ok := seen[ev.Key]; !ok {
				typ = "ADDED"
			}
			seen[ev.Key] = ev.Value
			return send(typ, r.render(ev.Value, ev.Revision))
		}
		last, ok := seen[ev.Key]
		if !ok {
			return nil
		}
		delete(seen, ev.Key)
		return send("DELETED", r.render(last, ev.Revision))
	})
	if err != nil && ctx.Err() == nil {
		_ = send("ERROR", map[string]any{"kind": "Status", "status": "Failure", "message": err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeStatus answers with a Kubernetes Status object.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	writeJSON(w, code, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": msg, "reason": reason, "code": code})
}

// writeError answers a store's or admission's error with its status.
func writeError(w http.ResponseWriter, err error) {
	var ie *api.InvalidError
	switch {
	case errors.As(err, &ie):
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid", err.Error())
	case errors.Is(err, informer.ErrConflict):
		writeStatus(w, http.StatusConflict, "Conflict", "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again")
	case errors.Is(err, informer.ErrNotFound):
		writeStatus(w, http.StatusNotFound, "NotFound", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
	default:
		writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
	}
}
