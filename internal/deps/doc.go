// Package deps holds no code, only a test: that the core packages (the
// data path a program uses with the in-memory store) compile none of the
// Kubernetes client libraries or the backends' clients. DESIGN.md promises
// it: "a program that uses the in-memory store compiles none of them".
package deps
