package kube_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/kube"
)

// secret is a Secret's data, the value of the conformance runs on secrets.
type secret struct {
	Type string            `json:"type"`
	Data map[string][]byte `json:"data,omitempty"`
}

func secretValue(i int) secret {
	return secret{Type: "Opaque", Data: map[string][]byte{"n": []byte(strconv.Itoa(i))}}
}

// configMap is a ConfigMap's data.
type configMap struct {
	Data map[string]string `json:"data,omitempty"`
}

// TestStoreShouldPassTheStoreConformanceSuiteOnSecrets runs the Store
// suite, the Source suite included, on the real kube-apiserver, each
// subtest in a namespace of its own. Secrets are the resource the test
// server does not watch-cache, so that Expire can compact its etcd and
// watches from before see 410 Gone. Not parallel: the compaction expires
// every watch of secrets.
func TestStoreShouldPassTheStoreConformanceSuiteOnSecrets(t *testing.T) {
	cfg := restConfig(t)
	etcd := testserver.KubeEtcd(t)
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, secret]{
		New: func(t *testing.T) informer.Store[string, secret] {
			s, err := kube.New[secret](cfg, secretsGVR, kube.WithNamespace[secret](namespace(t, cfg)))
			require.NoError(t, err)
			return s
		},
		Expire: func(ctx context.Context, _ informer.Store[string, secret]) error {
			return compactKubeEtcd(ctx, etcd[0])
		},
		DeletesCarryValue: true,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             secretValue,
	})
}

// TestStoreShouldPassTheStoreConformanceSuiteOnConfigMaps runs it on
// configmaps, which the server serves from its watch cache, as on a real
// cluster (no Expire: the cache keeps its window whatever etcd does).
func TestStoreShouldPassTheStoreConformanceSuiteOnConfigMaps(t *testing.T) {
	cfg := restConfig(t)
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, configMap]{
		New: func(t *testing.T) informer.Store[string, configMap] {
			s, err := kube.New[configMap](cfg, configMapsGVR, kube.WithNamespace[configMap](namespace(t, cfg)))
			require.NoError(t, err)
			return s
		},
		DeletesCarryValue: true,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) configMap { return configMap{Data: map[string]string{"n": strconv.Itoa(i)}} },
	})
}
