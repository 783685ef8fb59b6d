// Package kube is converge's Kubernetes backend: an informer.Store over any
// resource of a real API server (built-in or custom, namespaced or
// cluster-wide), so that a controller written against informer.Store runs
// unchanged on Kubernetes objects. It is a module of its own, so that the
// library's module never requires client-go or apimachinery.
//
// # Mapping
//
//   - Keys are "namespace/name" (names with WithNamespace, or for a
//     cluster-scoped resource).
//   - The revision is the resourceVersion: since Kubernetes 1.35 a decimal
//     integer that grows with every write of a resource type, so that
//     informer.WaitForRevision and read-your-writes work unchanged.
//   - Values are any type V that the codec (default encoding/json) turns
//     into the object's JSON: spec, status, data at the top level, and,
//     if V has one, a metadata field for labels and annotations (a
//     metav1.ObjectMeta fits, so do the typed API structs). The Store sets
//     apiVersion, kind, metadata.name, namespace and resourceVersion itself.
//   - Reads are JSON unless the caller asks for protobuf (WithProtobuf,
//     WithProtobufPointer): for a built-in type such as corev1.ConfigMap,
//     List, Watch and Get then decode the server's protobuf with the
//     type's generated Unmarshal, for about a quarter of the client CPU
//     of JSON on a list of ConfigMaps; writes stay JSON. A custom resource has no protobuf: the
//     server answers JSON, which the codec decodes.
//   - If V (or *V) is an object.Object (it embeds object.Meta), Meta maps
//     onto the server's metadata: Finalizers onto metadata.finalizers,
//     DeletionRequested onto deletionTimestamp, Generation onto
//     metadata.generation, which the server keeps (it bumps it on spec
//     changes) and the Store reads but never writes.
//   - Writes are compare-and-swap: Create is a POST, Update a PUT with the
//     resourceVersion precondition, Delete a DELETE with it; a 409 or a
//     missing object is informer.ErrConflict.
//   - A resource with a status subresource ignores .status on a PUT of the
//     object; Create and Update write a changed status with a second PUT,
//     to the subresource, so that no write drops half a change (see
//     Update). UpdateStatus writes only the status, with one request.
//   - Deletion: informer.RequestDelete of an object with finalizers writes
//     DeletionRequested, which the Store turns into a DELETE that the
//     server records as deletionTimestamp; the Update that removes the last
//     finalizer then deletes it, as on every converge store. A raw Delete
//     removes the object whatever its finalizers, as every converge store's
//     Delete does.
//   - Server-side apply is an extra method (Store.Apply), not the write
//     path: it merges by field ownership and compares no revision.
//   - List streams (WatchList) where the server can and reads pages where
//     it cannot (WithListMode); Watch asks for bookmarks; 410 Gone is
//     informer.ErrRevisionExpired.
//
// Lock is a leader.Lock over a coordination.k8s.io/v1 Lease, with
// converge's fencing term in an annotation beside the spec that client-go
// and kubectl read.
//
// The design note docs/design/kube.md gives the reasons and the
// alternatives.
package kube
