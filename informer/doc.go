// Package informer will keep a local, indexed cache in step with a backend
// store: it will define Source[K,V], a store that can List and Watch from a
// revision; a reflector that lists, watches and relists when a revision has
// expired; a thread-safe cache with indexes; fan-out of add, update and delete
// events to handlers, so that a slow handler never blocks another handler or
// the reflector; and periodic resync. It is level-triggered: after any fault
// the cache converges to the store and every handler sees every key's latest
// state, deletes carry the last known object, and HasSynced turns true only
// after the first full list has been delivered. Backends live in
// sub-packages (memory, poll, and later etcd, postgres and kube) so that
// their dependencies are compiled only by programs that use them. The package
// knows nothing about queues or controllers.
//
// Status: not implemented yet; see the project's issues.
package informer
