package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func validDeployment() *Deployment {
	d := &Deployment{Metadata: ObjectMeta{Name: "web"}, Spec: DeploymentSpec{
		Selector: LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: PodTemplateSpec{Metadata: TemplateMeta{Labels: map[string]string{"app": "web"}},
			Spec: PodSpec{Containers: []Container{{Name: "web", Command: []string{"cluster", "worker"}}}}},
	}}
	Default(d, 300)
	return d
}

func TestDefaultShouldFillInWhatKubernetesFillsIn(t *testing.T) {
	d := validDeployment()
	assert.Equal(t, "default", d.Namespace)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, RollingUpdateStrategy, d.Spec.Strategy.Type)
	assert.Equal(t, RollingUpdateDeployment{MaxSurge: "25%", MaxUnavailable: "25%"}, *d.Spec.Strategy.RollingUpdate)
	assert.Equal(t, int32(10), *d.Spec.RevisionHistoryLimit)
	assert.Equal(t, int32(600), *d.Spec.ProgressDeadlineSeconds)
	assert.Equal(t, RestartAlways, d.Spec.Template.Spec.RestartPolicy)
	assert.Empty(t, d.Spec.Template.Spec.Tolerations, "admission adds tolerations to pods, not templates")

	p := &Pod{Spec: PodSpec{Tolerations: []Toleration{{Key: TaintNodeUnreachable, Operator: "Exists"}}}}
	Default(p, 7)
	require.Len(t, p.Spec.Tolerations, 2, "the pod's own unreachable toleration is kept, not-ready is added")
	assert.Equal(t, TaintNodeNotReady, p.Spec.Tolerations[1].Key)
	assert.Equal(t, TaintNoExecute, p.Spec.Tolerations[1].Effect)
	assert.Equal(t, int64(7), *p.Spec.Tolerations[1].TolerationSeconds)
	n := &Node{Metadata: ObjectMeta{Name: "n1"}}
	Default(n, 300)
	assert.Empty(t, n.Namespace, "nodes are not namespaced")
}

func TestValidateShouldAcceptADefaultedDeployment(t *testing.T) {
	assert.NoError(t, Validate(validDeployment()))
}

func TestValidateShouldRefuseWhatKubernetesRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(d *Deployment)
		want   string
	}{
		"negative replicas": {func(d *Deployment) { *d.Spec.Replicas = -1 },
			`Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`},
		"selector not matching": {func(d *Deployment) { d.Spec.Template.Metadata.Labels = map[string]string{"app": "db"} },
			"spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not match template `labels`"},
		"no selector": {func(d *Deployment) { d.Spec.Selector = LabelSelector{} }, "spec.selector: Required value"},
		"both bounds zero": {func(d *Deployment) {
			d.Spec.Strategy.RollingUpdate = &RollingUpdateDeployment{MaxSurge: "0", MaxUnavailable: "0%"}
		}, "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"},
		"bad bound": {func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = "x" },
			`spec.strategy.rollingUpdate.maxSurge: Invalid value: "x"`},
		"bad quantity": {func(d *Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Requests = ResourceList{"cpu": "lots"}
		}, `spec.template.spec.containers[0].resources.requests.cpu: Invalid value: "lots"`},
		"template restart policy": {func(d *Deployment) { d.Spec.Template.Spec.RestartPolicy = RestartNever },
			`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`},
		"bad name":         {func(d *Deployment) { d.Name = "Web_1" }, `metadata.name: Invalid value: "Web_1"`},
		"no containers":    {func(d *Deployment) { d.Spec.Template.Spec.Containers = nil }, "spec.template.spec.containers: Required value"},
		"unknown strategy": {func(d *Deployment) { d.Spec.Strategy.Type = "BlueGreen" }, `spec.strategy.type: Unsupported value: "BlueGreen"`},
	} {
		d := validDeployment()
		tc.mutate(d)
		err := Validate(d)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
		var ie *InvalidError
		assert.ErrorAs(t, err, &ie, name)
	}
}

func TestValidateShouldListEveryProblem(t *testing.T) {
	d := validDeployment()
	*d.Spec.Replicas = -2
	d.Spec.Selector = LabelSelector{}
	err := Validate(d)
	require.Error(t, err)
	assert.Regexp(t, `is invalid: \[spec.replicas: .*, spec.selector: Required value\]`, err.Error())
}

func TestValidateShouldCheckPodsAndNodes(t *testing.T) {
	p := &Pod{Metadata: ObjectMeta{Name: "p", Namespace: "default"}, Spec: PodSpec{RestartPolicy: "Sometimes",
		Containers: []Container{{Name: "c", Command: []string{"x"}}}}}
	assert.ErrorContains(t, Validate(p), `spec.restartPolicy: Unsupported value: "Sometimes"`)
	n := &Node{Metadata: ObjectMeta{Name: "n1", Namespace: "x"}, Status: NodeStatus{Capacity: ResourceList{"memory": "8Zi"}}}
	err := Validate(n)
	assert.ErrorContains(t, err, `metadata.namespace: Invalid value: "x": not allowed on this type`)
	assert.ErrorContains(t, err, `status.capacity.memory: Invalid value: "8Zi"`)
}
