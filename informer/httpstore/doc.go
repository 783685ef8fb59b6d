// Package httpstore shares one informer.Store between processes over HTTP:
// a Server exposes any informer.Store[string, V] as a small JSON API, and a
// Client implements informer.Store[string, V] against it, so that a
// controller, an informer or a command-line tool in another process reads,
// watches and writes the same keys as if it held the store itself. It is
// the API server at the hub of a cluster: one process owns the store (the
// memory store, etcd, PostgreSQL) and every other process goes through it.
//
// # The protocol
//
// All paths are relative to where the Server is mounted; bodies are JSON;
// values are encoded with encoding/json.
//
//	GET    /keys[?selector=S]           list: {"revision":R,"entries":[{"key","value","revision","error"}]}
//	GET    /keys?key=K                  get: {"key","value","revision"}, or 404 with code NotFound
//	POST   /keys?key=K                  create, body the value: {"revision":R}
//	PUT    /keys?key=K&revision=R       update at R, body the value: {"revision":R'}
//	DELETE /keys?key=K[&revision=R]     delete (at R): {"revision":R'}
//	GET    /watch?after=R[&selector=S]  newline-delimited events, streamed
//
// A watch is one long response: a line per event, {"type":"PUT"|"DELETE",
// "key","value","revision","error"}, flushed as the store hands them over
// (a burst goes out in one flush), and a {"type":"BOOKMARK","revision":R}
// line every ServerOptions.BookmarkInterval, which keeps idle connections
// alive and carries the store's own bookmarks. A watch that fails after
// its first line ends with {"type":"ERROR","code","message"}.
//
// Every refused request is answered with {"code","message"} and a status:
// 400 BadRequest, 401 Unauthorized (no or unknown bearer token), 403
// Forbidden (a read-only token writing), 404 NotFound, 405
// MethodNotAllowed, 409 Conflict (informer.ErrConflict), 410 Expired
// (informer.ErrRevisionExpired), 413 TooLarge, 422 Invalid (a
// ServerOptions.Validate error), 500 Internal, 503 Unavailable. The Client
// turns them into an *Error that matches informer.ErrConflict,
// informer.ErrRevisionExpired or this package's sentinels with errors.Is.
// A refused write wrote nothing.
//
// # Selections
//
// A server with ServerOptions.Select serves a part of its store to a list
// or a watch that asks with a selector, as Kubernetes' API server serves a
// kubelet the pods of its node only (a field selector
// spec.nodeName=NODE): with many watchers that each want a small part,
// every write then reaches the watchers it concerns and no others. A
// selected list holds the selected entries, at the store's revision. A
// selected watch sends a PUT for each write of a selected value; a DELETE,
// without a value, when a key leaves the selection (a write whose value
// is no longer selected, as a pod bound to another node); the DELETE of a
// selected key; and nothing for the rest, whose revisions the next
// bookmark carries. An informer over a selected Client so holds exactly the
// selected keys. A value the store cannot decode is in every selection.
//
// The server learns what a watcher holds by listing the store when the
// watch starts. A watch resumed after an older revision replays the
// writes between that revision and the list first; there, the first
// write of a key that is not selected is sent as a DELETE (whether the
// watcher held the key cannot be known), which the informer ignores for a
// key it does not hold. Each selected watch costs the server a list and
// a set of its selected keys.
//
// # Connections that go quiet
//
// A client that stops reading a watch fails the server's next write after
// ServerOptions.WatchWriteTimeout, which ends the stream and the store's
// Watch under it. A server that stops sending (a machine gone without
// closing its connections) is noticed by the Client after
// ClientOptions.IdleTimeout without a line; the bookmarks keep a healthy
// idle stream under it. Either way the informer watches again after its
// last revision, and lists again only if that revision expired.
//
// # Tokens
//
// Bearer tokens travel in the clear over http: serve over https (an
// http.Server with TLS) wherever the network between the processes is not
// the machine's own.
//
// # Values the store cannot decode
//
// An entry or a Put whose value the store could not decode (informer.Entry.Err,
// informer.Event.Err) is sent with its error's text instead of a value, and
// the Client hands it on with Err set; a value the Client cannot decode into
// its V (a server of another version, say) is handed on the same way. One
// bad value never fails a List or a Watch.
package httpstore
