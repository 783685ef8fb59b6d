// Package testserver finds the real servers that integration tests run
// against: the throwaway etcd, PostgreSQL and kube-apiserver servers that
// scripts/servers.sh starts on loopback ports and describes in environment
// variables. `make test` starts them, exports the variables and sets
// CONVERGE_INTEGRATION=1.
//
// Every lookup takes the test: when a server's variable is missing, the test
// is skipped with a message naming the variable and `make test`, unless
// CONVERGE_INTEGRATION=1, in which case a missing server fails the test. So
// `go test ./...` on a machine without servers passes and says which tests it
// skipped (go test -v shows them), and CI can never pass by skipping.
package testserver

import (
	"os"
	"strings"
	"testing"
)

// Environment variables read by this package (written by scripts/servers.sh).
const (
	// IntegrationEnv, set to 1, turns a missing server into a test failure.
	IntegrationEnv = "CONVERGE_INTEGRATION"
	// EtcdEndpointsEnv holds the single-node etcd's host:port.
	EtcdEndpointsEnv = "CONVERGE_ETCD_ENDPOINTS"
	// EtcdStateDirEnv is the directory of the single-node etcd's member
	// directory (see EtcdMember).
	EtcdStateDirEnv = "CONVERGE_ETCD_STATE_DIR"
	// EtcdClusterEndpointsEnv holds the 3-node etcd cluster's host:ports,
	// comma-separated.
	EtcdClusterEndpointsEnv = "CONVERGE_ETCD_CLUSTER_ENDPOINTS"
	// EtcdClusterStateDirEnv is the directory of the cluster's member
	// directories.
	EtcdClusterStateDirEnv = "CONVERGE_ETCD_CLUSTER_STATE_DIR"
	// KubeconfigEnv is the path of a kubeconfig for the kube-apiserver.
	KubeconfigEnv = "CONVERGE_KUBECONFIG"
	// KubeEtcdEndpointsEnv holds the host:port of the etcd that only the
	// kube-apiserver uses.
	KubeEtcdEndpointsEnv = "CONVERGE_KUBE_ETCD_ENDPOINTS"
)

// Integration reports whether CONVERGE_INTEGRATION=1, that is whether a
// missing server must fail the test rather than skip it.
func Integration() bool { return os.Getenv(IntegrationEnv) == "1" }

// lookup returns the value of the environment variable name, or fails or
// skips t (see the package doc) naming what it is for.
func lookup(t testing.TB, name, what string) string {
	t.Helper()
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	if Integration() {
		t.Fatalf("%s=1 but %s is not set: %s is not running. "+
			"Run `make test`, or `scripts/servers.sh start` and eval `scripts/servers.sh env`.",
			IntegrationEnv, name, what)
	}
	t.Skipf("SKIPPED INTEGRATION TEST: %s is not set (no %s). "+
		"Run `make test` to start the servers and run every integration test; "+
		"set %s=1 to make this a failure.", name, what, IntegrationEnv)
	return ""
}

// Etcd returns the client endpoints (host:port) of the single-node etcd,
// or skips or fails t if there is none (see the package doc).
//
// Tests share it, also across packages running in parallel: use a prefix of
// keys unique to the test, do not compact it or kill it from a parallel test
// (compaction expires every other test's older revisions), and leave it
// running when the test ends.
func Etcd(t testing.TB) []string {
	t.Helper()
	return splitList(lookup(t, EtcdEndpointsEnv, "single-node etcd"))
}

// EtcdCluster returns the client endpoints (host:port) of the 3-node etcd
// cluster, or skips or fails t if there is none. Shared like Etcd.
func EtcdCluster(t testing.TB) []string {
	t.Helper()
	return splitList(lookup(t, EtcdClusterEndpointsEnv, "3-node etcd cluster"))
}

// Kubeconfig returns the path of a kubeconfig for the real kube-apiserver
// (user admin, group system:masters), or skips or fails t if there is none
// (see the package doc). Tests share the server: use a namespace, or names,
// unique to the test.
func Kubeconfig(t testing.TB) string {
	t.Helper()
	return lookup(t, KubeconfigEnv, "kube-apiserver")
}

// KubeEtcd returns the client endpoints of the etcd under the
// kube-apiserver, or skips or fails t like Kubeconfig. Compacting it
// expires the revisions of the resources the server does not watch-cache
// (secrets; see scripts/servers.sh).
func KubeEtcd(t testing.TB) []string {
	t.Helper()
	return splitList(lookup(t, KubeEtcdEndpointsEnv, "kube-apiserver's etcd"))
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
