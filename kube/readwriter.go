package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/converge-go/converge/informer"
)

// Get reads key's object with a consistent read (the server asks etcd, not
// its watch cache), and returns its value and resourceVersion, or ok false
// if it does not exist. A value the codec cannot decode is an error
// wrapping *DecodeError.
func (s *Store[V]) Get(ctx context.Context, key string) (V, informer.Revision, bool, error) {
	var zero V
	if err := s.resolve(ctx); err != nil {
		return zero, 0, false, err
	}
	ns, name, err := s.split(key)
	if err != nil {
		return zero, 0, false, err
	}
	data, pb, err := s.c.get(ctx, s.objectPath(ns, name), nil, s.accept())
	if isCode(err, http.StatusNotFound) {
		return zero, 0, false, nil
	}
	if err != nil {
		return zero, 0, false, err
	}
	s.read(pb)
	if pb {
		if data, err = unwrapProtobuf(data); err != nil {
			return zero, 0, false, err
		}
	}
	e, _, err := s.decode(data, pb, false)
	if err != nil {
		return zero, 0, false, err
	}
	if e.Err != nil {
		return zero, 0, false, e.Err
	}
	return e.Value, e.Revision, true, nil
}

// Create creates key's object from v with a POST, and returns its
// resourceVersion. If v has a .status and the resource has a status
// subresource (where the POST ignores .status), the status is then written
// with a PUT to it, and the revision returned is that write's. An object
// that exists is informer.ErrConflict.
func (s *Store[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	if err := s.resolve(ctx); err != nil {
		return 0, err
	}
	ns, name, err := s.split(key)
	if err != nil {
		return 0, err
	}
	enc, err := encode(s.opts.codec, v, s.encodeOptions(ns, name, ""))
	if err != nil {
		return 0, err
	}
	data, err := s.c.call(ctx, http.MethodPost, s.collectionPath(ns), nil, enc.body)
	if err != nil {
		return 0, conflict(err, http.StatusConflict)
	}
	return s.seen(s.afterWrite(ctx, ns, name, enc, data, v))
}

// Update replaces key's object by v with a PUT at resourceVersion rev, and
// returns the new resourceVersion. A changed or absent object, or rev 0, is
// informer.ErrConflict. The PUT to the object leaves its .status as it
// was when the resource has a status subresource: if v has a .status and
// it differs from the object's after the PUT, Update writes it with a
// second PUT, to the status subresource at the first one's revision, and
// returns that one's revision. If the second conflicts, the first has been
// written: the error then says so and does not match informer.ErrConflict
// (the outcome is a half write: read again).
//
// If v is an object.Object that is Deleting and the object is not, Update
// then requests its deletion (a DELETE at the revision written): with
// finalizers the object stays, marked with a deletionTimestamp, and the
// revision returned is the mark's; without, it is deleted, and the revision
// is the delete's.
//
// A PUT that changes nothing is not a write: the server returns the
// object's revision, rev. If v has a metadata.uid (a typed value's
// ObjectMeta), the PUT has it as a precondition too.
func (s *Store[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := s.resolve(ctx); err != nil {
		return 0, err
	}
	ns, name, err := s.split(key)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("kube: update %s: revision 0: %w", key, informer.ErrConflict)
	}
	enc, err := encode(s.opts.codec, v, s.encodeOptions(ns, name, formatRevision(rev)))
	if err != nil {
		return 0, err
	}
	data, code, err := s.c.callCode(ctx, http.MethodPut, s.objectPath(ns, name), nil, enc.body)
	if err != nil {
		return 0, conflict(err, http.StatusConflict, http.StatusNotFound)
	}
	if code == http.StatusCreated {
		return 0, s.undoCreate(ctx, ns, name, data)
	}
	return s.seen(s.afterWrite(ctx, ns, name, enc, data, v))
}

// undoCreate deletes the object that a PUT created: some resources
// (leases, endpoints) create an absent object on a PUT, whatever its
// resourceVersion, unless the PUT has its uid. Update of an absent key is
// a conflict, so the object goes again, and a watch sees it come and go.
func (s *Store[V]) undoCreate(ctx context.Context, ns, name string, data []byte) error {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("kube: update %s: the object did not exist and the PUT created it: %w", name, err)
	}
	rev, err := parseRevision(env.Metadata.ResourceVersion)
	if err == nil {
		_, err = s.deleteAt(ctx, ns, name, rev, rev, true)
	}
	if err != nil {
		return fmt.Errorf("kube: update %s: the object did not exist and the PUT created it, which could not be undone: %v", name, err)
	}
	return fmt.Errorf("kube: update %s: the object does not exist: %w", name, informer.ErrConflict)
}

// afterWrite completes a create or update whose response is data: the
// status half, then a requested deletion, and returns the last revision.
func (s *Store[V]) afterWrite(ctx context.Context, ns, name string, enc encoded, data []byte, v V) (informer.Revision, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, fmt.Errorf("kube: %s: decode the server's answer: %w", name, err)
	}
	rev, err := parseRevision(env.Metadata.ResourceVersion)
	if err != nil {
		return 0, err
	}
	// A value without a .status (a type without the field, or an empty
	// one left out by omitempty) leaves the status alone: writing it would
	// wipe what a controller recorded there.
	if s.status && enc.status != nil && !sameStatus(enc.status, env.Status) {
		enc2, err := encode(s.opts.codec, v, s.encodeOptions(ns, name, env.Metadata.ResourceVersion))
		if err != nil {
			return 0, err
		}
		data, err = s.c.call(ctx, http.MethodPut, s.objectPath(ns, name)+"/status", nil, enc2.body)
		if err != nil {
			return 0, fmt.Errorf("kube: %s written at revision %d, but not its status: %w", name, rev, err)
		}
		env = envelope{}
		if err := json.Unmarshal(data, &env); err != nil {
			return 0, fmt.Errorf("kube: %s: decode the server's answer: %w", name, err)
		}
		if rev, err = parseRevision(env.Metadata.ResourceVersion); err != nil {
			return 0, err
		}
	}
	if m := metaOf(&v); m != nil && m.Deleting() && env.Metadata.DeletionTimestamp == nil {
		r, err := s.deleteAt(ctx, ns, name, rev, rev, false)
		if err != nil && errors.Is(err, informer.ErrConflict) {
			return 0, fmt.Errorf("kube: %s written at revision %d, but its deletion not: %v", name, rev, err)
		}
		return r, err
	}
	return rev, nil
}

// Delete removes key's object and returns the revision of its deletion,
// the revision of the DELETED event that Watch emits. With rev above 0 the
// DELETE has the precondition resourceVersion=rev (a changed or absent
// object is informer.ErrConflict); with rev 0 it reads the object first
// and deletes it at the revision read (0 and a nil error if it does not
// exist).
//
// Like every converge store's Delete, it removes the key: an object with
// finalizers that the DELETE only marked (deletionTimestamp) has them
// removed by a PUT at the mark's revision, which makes the server delete
// it. To honour finalizers, use informer.RequestDelete, which only marks
// such an object (see the package doc).
//
// The DELETE's answer carries no revision, so Delete reads the server's
// current revision first (a list of at most one object) and then watches
// the object's name from there for its DELETED event: from rev itself
// would fail once rev is older than the server's history (the watch
// cache keeps minutes of it), and an object's revision is often older.
// It waits for the event until ctx is done.
func (s *Store[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	if err := s.resolve(ctx); err != nil {
		return 0, err
	}
	ns, name, err := s.split(key)
	if err != nil {
		return 0, err
	}
	for {
		at := rev
		if rev == 0 {
			// A DELETE without a precondition would not tell whether the
			// object existed.
			data, err := s.c.call(ctx, http.MethodGet, s.objectPath(ns, name), nil, nil)
			if isCode(err, http.StatusNotFound) {
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			var env envelope
			if err := json.Unmarshal(data, &env); err != nil {
				return 0, fmt.Errorf("kube: delete %s: %w", key, err)
			}
			if at, err = parseRevision(env.Metadata.ResourceVersion); err != nil {
				return 0, err
			}
		}
		head, err := s.head(ctx, ns)
		if err != nil {
			return 0, fmt.Errorf("kube: delete %s: %w", key, err)
		}
		d, err := s.deleteAt(ctx, ns, name, at, head, true)
		if rev > 0 || !errors.Is(err, informer.ErrConflict) {
			return s.seen(d, err)
		}
		if errors.Is(err, errGone) {
			return 0, nil
		}
		// Changed since the read: read again.
	}
}

// errGone is deleteAt's ErrConflict when the object did not exist.
var errGone = fmt.Errorf("the object does not exist: %w", informer.ErrConflict)

// deleteAt sends a DELETE with the precondition resourceVersion=rev. If
// the object then still exists (it has finalizers) it returns the mark's
// revision, unless strip, when it removes the finalizers at that revision.
// Once the object is gone it returns the revision of its DELETED event,
// watched for from revision from (at most the deletion's, and within the
// server's history).
func (s *Store[V]) deleteAt(ctx context.Context, ns, name string, rev, from informer.Revision, strip bool) (informer.Revision, error) {
	body, _ := json.Marshal(map[string]any{
		"apiVersion":    "v1",
		"kind":          "DeleteOptions",
		"preconditions": map[string]string{"resourceVersion": formatRevision(rev)},
	})
	data, err := s.c.call(ctx, http.MethodDelete, s.objectPath(ns, name), nil, body)
	if isCode(err, http.StatusNotFound) {
		return 0, fmt.Errorf("kube: delete %s at revision %d: %w", name, rev, errGone)
	}
	if err != nil {
		return 0, conflict(err, http.StatusConflict)
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, fmt.Errorf("kube: delete %s: decode the server's answer: %w", name, err)
	}
	if env.Kind != "Status" && env.Metadata.DeletionTimestamp != nil {
		// Still there: finalizers (or a grace period) hold it.
		marked, err := parseRevision(env.Metadata.ResourceVersion)
		if err != nil {
			return 0, err
		}
		if !strip || len(env.Metadata.Finalizers) == 0 {
			return marked, nil
		}
		if err := s.stripFinalizers(ctx, ns, name, data); err != nil {
			return 0, fmt.Errorf("kube: delete %s: marked for deletion at revision %d, but not deleted: %v", name, marked, err)
		}
	}
	return s.deletedRevision(ctx, ns, name, from)
}

// stripFinalizers PUTs obj (the server's JSON of the object, at its
// revision) without finalizers.
func (s *Store[V]) stripFinalizers(ctx context.Context, ns, name string, obj []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return err
	}
	var md map[string]any
	if err := json.Unmarshal(m["metadata"], &md); err != nil {
		return err
	}
	delete(md, "finalizers")
	var err error
	if m["metadata"], err = json.Marshal(md); err != nil {
		return err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = s.c.call(ctx, http.MethodPut, s.objectPath(ns, name), nil, body)
	return err
}

// deletedRevision watches name from rev and returns the revision of its
// DELETED event.
func (s *Store[V]) deletedRevision(ctx context.Context, ns, name string, rev informer.Revision) (informer.Revision, error) {
	q := url.Values{}
	q.Set("watch", "1")
	q.Set("resourceVersion", formatRevision(rev))
	q.Set("fieldSelector", "metadata.name="+name)
	resp, err := s.c.do(ctx, http.MethodGet, s.collectionPath(ns), q, nil)
	if err != nil {
		return 0, fmt.Errorf("kube: delete %s: watch for its deletion: %w", name, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var f frame
		if err := dec.Decode(&f); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = ctxErr
			}
			return 0, fmt.Errorf("kube: delete %s: watch for its deletion: %w", name, err)
		}
		switch f.Type {
		case "DELETED":
			var env envelope
			if err := json.Unmarshal(f.Object, &env); err != nil {
				return 0, fmt.Errorf("kube: delete %s: watch for its deletion: %w", name, err)
			}
			return parseRevision(env.Metadata.ResourceVersion)
		case "ERROR":
			return 0, fmt.Errorf("kube: delete %s: watch for its deletion: %w", name, watchError(f.Object, false))
		}
	}
}

// encodeOptions is what encode writes into an object of this Store.
func (s *Store[V]) encodeOptions(ns, name, rv string) encodeOptions {
	return encodeOptions{apiVersion: s.apiVersion(), kind: s.res.Kind, namespace: ns, name: name, resourceVersion: rv}
}

// isCode reports whether err is an *APIError with the code.
func isCode(err error, code int) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}

// conflict wraps err with informer.ErrConflict if it is an *APIError with
// one of codes.
func conflict(err error, codes ...int) error {
	for _, c := range codes {
		if isCode(err, c) {
			return fmt.Errorf("%w: %w", informer.ErrConflict, err)
		}
	}
	return err
}
