package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/converge-go/converge/informer"
)

// UpdateStatus writes v's .status to key's object with one PUT to the
// status subresource at resourceVersion rev, and returns the new
// resourceVersion (rev itself if the status is unchanged: the server then
// writes nothing). The server keeps the rest of the object as it is: a
// custom resource's spec and metadata in v are ignored, and a built-in
// resource's status strategy decides the same for its own fields. A value
// without a .status writes an empty one.
//
// Use it in a controller that only records what it observed: it costs one
// request where Update costs two on a resource with a status subresource
// (a PUT of the object, which changes nothing, then one of the status), as
// controller-runtime's Status().Update. It is an extra method, not the
// Store's write path: informer's helpers use Update, which writes both
// halves, and UpdateStatus neither requests a deletion nor bumps the
// generation.
//
// A changed or absent object, or rev 0, is informer.ErrConflict. A
// resource without a status subresource is an error, and nothing is sent:
// a PUT there would write the whole object.
func (s *Store[V]) UpdateStatus(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	if err := s.resolve(ctx); err != nil {
		return 0, err
	}
	ns, name, err := s.split(key)
	if err != nil {
		return 0, err
	}
	if !s.status {
		return 0, fmt.Errorf("kube: update status of %s: %s has no status subresource (use Update)", key, s.gvr.Resource)
	}
	if rev == 0 {
		return 0, fmt.Errorf("kube: update status of %s: revision 0: %w", key, informer.ErrConflict)
	}
	enc, err := encode(s.opts.codec, v, s.encodeOptions(ns, name, formatRevision(rev)))
	if err != nil {
		return 0, err
	}
	data, err := s.c.call(ctx, http.MethodPut, s.objectPath(ns, name)+"/status", nil, enc.body)
	if err != nil {
		return 0, conflict(err, http.StatusConflict, http.StatusNotFound)
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, fmt.Errorf("kube: update status of %s: decode the server's answer: %w", key, err)
	}
	return s.seen(parseRevision(env.Metadata.ResourceVersion))
}
