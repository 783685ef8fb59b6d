// Package deps holds no code, only tests of the import graph: that the core
// packages (the data path a program uses with the in-memory store) compile
// none of the Kubernetes client libraries or the backends' clients, so that
// a program that uses the in-memory store compiles none of them; and that
// the work queue keeps its place in the data path, compiling nothing of the
// module but backoff and its own engine (internal/workqueue), and compiled
// by nothing left of it.
package deps
