//go:build tools

// Package tools pins the Kubernetes control plane that scripts/servers.sh
// builds for the integration tests of the kube module: go.mod requires
// k8s.io/kubernetes with a replace to the published version of each of its
// staging modules, and this file's imports keep `go mod tidy` from dropping
// them. Nothing here is compiled into the library.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
