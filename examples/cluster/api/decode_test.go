package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const webManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        command: [cluster, worker]
        resources:
          requests: {cpu: 1, memory: 64Mi}
---
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: tools}
spec:
  nodeName: n1
  containers: [{name: c, command: [sleep, "60"]}]
`

func TestDecodeShouldReadEveryDocumentOfAManifest(t *testing.T) {
	docs, err := Decode([]byte(webManifest))
	require.NoError(t, err)
	require.Len(t, docs, 2)
	d := docs[0].Object.(*Deployment)
	assert.Equal(t, KindDeployment, docs[0].Kind)
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, "1", d.Spec.Strategy.RollingUpdate.MaxSurge, "an integer bound is kept as written")
	assert.Equal(t, Quantity("1"), d.Spec.Template.Spec.Containers[0].Resources.Requests["cpu"])
	p := docs[1].Object.(*Pod)
	assert.Equal(t, "tools/solo", p.Key())
	assert.Equal(t, 21, docs[1].Line)
}

func TestDecodeShouldRefuseBadManifestsWithTheirLine(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"unknown field": {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec:\n  replica: 3\n",
			`line 5: unknown field "spec.replica" (in Deployment)`},
		"syntax error": {"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a: b\n",
			"error parsing YAML: line 4"},
		"unknown kind": {"apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
			`line 1: no matches for kind "Service" in version "v1"`},
		"wrong version": {"apiVersion: v1\nkind: Deployment\nmetadata: {name: s}\n",
			`no matches for kind "Deployment" in version "v1" (want apiVersion "apps/v1")`},
		"no kind": {"apiVersion: v1\nmetadata: {name: s}\n", "Object 'Kind' is missing"},
		"wrong type": {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec:\n  replicas: three\n",
			`line 5: spec.replicas: want an integer, got "three"`},
		"list for a map": {"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: [a]\n",
			"line 5: metadata.labels: want a mapping, got a list"},
	} {
		_, err := Decode([]byte(tc.in))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}
