package ctl

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	raw api.Stores
	url string
}

func newFixture(t *testing.T) *fixture {
	raw := must.Do(api.NewMemoryStores())
	srv := httptest.NewServer(must.Do(apiserver.New(raw, apiserver.Options{TolerationSeconds: 300,
		Tokens: map[string]httpstore.Access{"rw": httpstore.ReadWrite, "ro": httpstore.ReadOnly}})))
	t.Cleanup(srv.Close)
	return &fixture{raw: raw, url: srv.URL}
}

// run runs the CLI and returns its exit status, stdout and stderr.
func (f *fixture) run(t *testing.T, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(append([]string{"--api", f.url, "--token", "rw"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, body string) string {
	path := filepath.Join(t.TempDir(), "m.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const manifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, command: [cluster, worker]}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  containers: [{name: c, command: [sleep, "60"]}]
`

func TestApplyShouldCreateThenLeaveUnchangedThenConfigure(t *testing.T) {
	f := newFixture(t)
	path := writeFile(t, manifest)
	code, out, errOut := f.run(t, "apply", "-f", path)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "deployment.apps/web created\npod/solo created\n", out)
	code, out, _ = f.run(t, "apply", "-f", path)
	require.Equal(t, 0, code)
	assert.Equal(t, "deployment.apps/web unchanged\npod/solo unchanged\n", out, "the server's defaults are no change")
	code, out, _ = f.run(t, "apply", "-f", writeFile(t, strings.Replace(manifest, "replicas: 3", "replicas: 4", 1)))
	require.Equal(t, 0, code)
	assert.Contains(t, out, "deployment.apps/web configured")
	d, _, _, err := f.raw.Deployments.Get(t.Context(), "default/web")
	require.NoError(t, err)
	assert.Equal(t, int32(4), *d.Spec.Replicas)
	assert.Equal(t, int64(2), d.Generation, "a spec change is a new generation")
}

func TestApplyShouldRefuseABadManifestWholeWithKubectlErrors(t *testing.T) {
	f := newFixture(t)
	for name, tc := range map[string]struct{ body, want string }{
		"negative replicas": {strings.Replace(manifest, "replicas: 3", "replicas: -1", 1),
			`Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`},
		"unknown field": {strings.Replace(manifest, "nodeName", "x", 1) + "  nodeNme: n1\n", `line 17: unknown field "spec.nodeNme" (in Pod)`},
		"selector":      {strings.Replace(manifest, "labels: {app: web}", "labels: {app: db}", 1), "`selector` does not match template `labels`"},
		"syntax":        {manifest + "---\nkind: [\n", "error parsing YAML: line"},
		"unknown kind":  {manifest + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n", `no matches for kind "Service"`},
	} {
		code, out, errOut := f.run(t, "apply", "-f", writeFile(t, tc.body))
		assert.Equal(t, 1, code, name)
		assert.Empty(t, out, name)
		assert.Contains(t, errOut, tc.want, name)
		assert.True(t, strings.HasPrefix(errOut, "error: "), name)
	}
	entries, _, err := f.raw.Pods.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, entries, "the good documents of a bad manifest are not applied")
}

func TestCLIShouldAnswerBadInputWithKubectlsErrors(t *testing.T) {
	f := newFixture(t)
	for args, want := range map[string]string{
		"get foo":                          `error: the server doesn't have a resource type "foo"`,
		"get pods nope":                    `Error from server (NotFound): pods "nope" not found`,
		"describe deploy/nope":             `Error from server (NotFound): deployments.apps "nope" not found`,
		"scale deploy/web --replicas=-2":   "error: the --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0",
		"delete deploy/web --cascade=some": `error: invalid cascade value (some)`,
		"get pods -o xml":                  "unable to match a printer",
		"rollout undo deploy/nope":         `deployments.apps "nope" not found`,
	} {
		code, _, errOut := f.run(t, strings.Fields(args)...)
		assert.Equal(t, 1, code, args)
		assert.Contains(t, errOut, want, args)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 1, Main([]string{"--api", f.url, "--token", "ro", "cordon", "n1"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "Error from server")
}

func TestGetShouldPrintKubectlsTables(t *testing.T) {
	f := newFixture(t)
	code, _, errOut := f.run(t, "apply", "-f", writeFile(t, manifest))
	require.Equal(t, 0, code, errOut)
	code, out, _ := f.run(t, "get", "deploy,pods", "-o", "wide")
	require.Equal(t, 0, code)
	assert.Regexp(t, `NAME +READY +UP-TO-DATE +AVAILABLE +AGE +CONTAINERS +COMMAND +SELECTOR\ndeployment.apps/web +0/3 +0 +0 +\d+s +web +cluster worker +app=web\n\nNAME +READY +STATUS +RESTARTS +AGE +PID +NODE\npod/solo +0/1 +Pending +0 +\d+s +<none> +<none>\n`, out)
	code, out, _ = f.run(t, "get", "pod", "solo", "-o", "yaml")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "kind: Pod\n")
	assert.Contains(t, out, "tolerationSeconds: 300")
	code, out, _ = f.run(t, "-n", "other", "get", "pods")
	require.Equal(t, 0, code)
	assert.Empty(t, out)
	code, out, _ = f.run(t, "get", "pods", "-n", "other")
	require.Equal(t, 0, code)
	assert.Empty(t, out, "-n after the verb, as kubectl takes it")
}

func TestDeleteShouldRecordTheCascadeAsKubernetesDoes(t *testing.T) {
	f := newFixture(t)
	code, _, _ := f.run(t, "apply", "-f", writeFile(t, manifest))
	require.Equal(t, 0, code)
	code, out, _ := f.run(t, "delete", "deploy/web", "--cascade=foreground")
	require.Equal(t, 0, code)
	assert.Equal(t, "deployment.apps \"web\" deleted\n", out)
	d, _, ok, err := f.raw.Deployments.Get(t.Context(), "default/web")
	require.NoError(t, err)
	require.True(t, ok, "it waits for the garbage collector")
	assert.Equal(t, []string{api.FinalizerForeground}, d.Finalizers)
	assert.True(t, d.Deleting())
	code, _, _ = f.run(t, "delete", "pod", "solo")
	require.Equal(t, 0, code)
	_, _, ok, _ = f.raw.Pods.Get(t.Context(), "default/solo")
	assert.False(t, ok)
}

func TestScaleCordonAndUndoShouldWriteWhatKubectlWrites(t *testing.T) {
	f := newFixture(t)
	code, _, _ := f.run(t, "apply", "-f", writeFile(t, manifest))
	require.Equal(t, 0, code)
	code, out, _ := f.run(t, "scale", "deploy/web", "--replicas=5")
	require.Equal(t, 0, code)
	assert.Equal(t, "deployment.apps/web scaled\n", out)

	node := api.Node{Metadata: api.Metadata{Name: "n1"}}
	_, err := f.raw.Nodes.Create(t.Context(), "n1", node)
	require.NoError(t, err)
	code, out, _ = f.run(t, "cordon", "n1")
	require.Equal(t, 0, code)
	assert.Equal(t, "node/n1 cordoned\n", out)
	code, out, _ = f.run(t, "get", "nodes")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "Unknown,SchedulingDisabled", "no agent reported Ready")

	d, _, _, err := f.raw.Deployments.Get(t.Context(), "default/web")
	require.NoError(t, err)
	owner := api.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: true}
	for rev, cmd := range map[string][]string{"1": {"old"}, "2": {"cluster", "worker"}} {
		rs := api.ReplicaSet{Metadata: api.Metadata{Name: "web-" + rev, Namespace: "default", OwnerReferences: []api.OwnerReference{owner},
			Annotations: map[string]string{api.RevisionAnnotation: rev}},
			Spec: api.ReplicaSetSpec{Selector: api.LabelSelector{MatchLabels: map[string]string{"app": "web", api.PodTemplateHashLabel: rev}},
				Template: api.PodTemplateSpec{Metadata: api.TemplateMeta{Labels: map[string]string{"app": "web", api.PodTemplateHashLabel: rev}},
					Spec: api.PodSpec{RestartPolicy: api.RestartAlways, Containers: []api.Container{{Name: "web", Command: cmd}}}}}}
		_, err := f.raw.ReplicaSets.Create(t.Context(), rs.Key(), rs)
		require.NoError(t, err)
	}
	code, out, _ = f.run(t, "describe", "deploy/web")
	require.Equal(t, 0, code)
	assert.Regexp(t, `OldReplicaSets: +web-1 \(0/1 replicas created\)\nNewReplicaSet: +web-2 \(0/1 replicas created\)|NewReplicaSet: +web-2 \(0/1 replicas created\)\nOldReplicaSets: +web-1`, out)
	code, out, _ = f.run(t, "describe", "node", "n1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "Non-terminated Pods:")
	code, out, _ = f.run(t, "rollout", "history", "deploy/web")
	require.Equal(t, 0, code)
	assert.Regexp(t, `REVISION +CHANGE-CAUSE\n1 +<none>\n2 +<none>\n`, out)
	code, out, _ = f.run(t, "rollout", "undo", "deploy/web")
	require.Equal(t, 0, code)
	assert.Equal(t, "deployment.apps/web rolled back\n", out)
	d, _, _, err = f.raw.Deployments.Get(t.Context(), "default/web")
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, d.Spec.Template.Spec.Containers[0].Command, "revision 1's template")
	assert.Equal(t, map[string]string{"app": "web"}, d.Spec.Template.Metadata.Labels, "without its pod-template-hash")
	code, out, _ = f.run(t, "rollout", "undo", "deploy/web", "--to-revision=1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "skipped rollback (current template already matches revision 1)")
	code, _, errOut := f.run(t, "rollout", "undo", "deploy/web", "--to-revision=7")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "unable to find specified revision 7 in history")
}

func TestRolloutStatusShouldSayWhatTheRolloutWaitsFor(t *testing.T) {
	three := int32(3)
	d := &api.Deployment{Metadata: api.Metadata{Name: "web", Meta: object.Meta{Generation: 2}}, Spec: api.DeploymentSpec{Replicas: &three}}
	d.Status.ObservedGeneration = 1
	msg, done, err := RolloutStatus(d)
	assert.Equal(t, "Waiting for deployment spec update to be observed...", msg)
	assert.False(t, done)
	require.NoError(t, err)
	d.Status = api.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1}
	msg, _, _ = RolloutStatus(d)
	assert.Equal(t, `Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...`, msg)
	d.Status = api.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3}
	msg, _, _ = RolloutStatus(d)
	assert.Equal(t, `Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...`, msg)
	d.Status = api.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
	msg, done, _ = RolloutStatus(d)
	assert.Equal(t, `deployment "web" successfully rolled out`, msg)
	assert.True(t, done)
	d.Status.Conditions = []object.Condition{{Type: api.DeploymentProgressing, Status: object.ConditionFalse, Reason: api.ReasonProgressDeadlineExceeded}}
	_, done, err = RolloutStatus(d)
	assert.True(t, done)
	assert.EqualError(t, err, `deployment "web" exceeded its progress deadline`)
}

func TestDescribeShouldShowRepeatedEventsAsKubectlDoes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	p := &api.Pod{Metadata: api.Metadata{Name: "web-x", Namespace: "default"}, Spec: api.PodSpec{NodeName: "n1",
		Containers: []api.Container{{Name: "web", Command: []string{"cluster", "worker"}}}}}
	p.Status.ContainerStatuses = []api.ContainerStatus{{Name: "web", RestartCount: 4, State: api.ContainerState{
		Waiting: &api.ContainerStateWaiting{Reason: api.ReasonCrashLoopBackOff}}}}
	evs := []events.Event{{Type: events.Warning, Reason: "BackOff", Source: "kubelet", Message: "Back-off restarting failed container web",
		Count: 4, First: now.Add(-10 * time.Second), Last: now.Add(-3 * time.Second)}}
	var out bytes.Buffer
	Describe(&out, p, Related{}, evs, now)
	assert.Contains(t, out.String(), "Status:            CrashLoopBackOff")
	assert.Contains(t, out.String(), "Restart Count:")
	assert.Regexp(t, `Warning +BackOff +3s \(x4 over 10s\) +kubelet +Back-off restarting failed container web`, out.String())
}

func TestHumanDurationShouldRoundAsKubectlDoes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 119 * time.Second: "119s", 150 * time.Second: "2m30s", 30 * time.Minute: "30m",
		5 * time.Hour: "5h0m", 30 * time.Hour: "30h", 50 * time.Hour: "2d2h", 20 * 24 * time.Hour: "20d",
	} {
		assert.Equal(t, want, HumanDuration(d), d)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestGetWatchShouldPrintARowPerChangeUntilStopped(t *testing.T) {
	f := newFixture(t)
	code, _, _ := f.run(t, "apply", "-f", writeFile(t, manifest))
	require.Equal(t, 0, code)
	ctx, cancel := context.WithCancel(t.Context())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"--api", f.url, "--token", "ro", "get", "pods", "-w"}, &out, io.Discard)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "solo") }, 10*time.Second, 5*time.Millisecond, "the list")
	_, _, err := informer.Update(t.Context(), f.raw.Pods, "default/solo", func(p *api.Pod) error {
		p.Status.Phase = api.PodRunning
		return nil
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Running") }, 10*time.Second, 5*time.Millisecond,
		"a row for the change")
	cancel()
	assert.Equal(t, 0, <-done)
	assert.Regexp(t, `NAME +READY +STATUS +RESTARTS +AGE\nsolo +0/1 +Pending .*\nsolo +0/1 +Running `, out.String())
}

func TestDrainShouldCordonAndEvictOnlyManagedPodsUnlessForced(t *testing.T) {
	f := newFixture(t)
	_, err := f.raw.Nodes.Create(t.Context(), "n1", api.Node{Metadata: api.Metadata{Name: "n1"}})
	require.NoError(t, err)
	pod := func(name string, owned bool) api.Pod {
		p := api.Pod{Metadata: api.Metadata{Name: name, Namespace: "default"}, Spec: api.PodSpec{NodeName: "n1",
			Containers: []api.Container{{Name: "c", Command: []string{"x"}}}}}
		if owned {
			p.OwnerReferences = []api.OwnerReference{{Kind: "ReplicaSet", Name: "web-1", UID: "u", Controller: true}}
		}
		return p
	}
	for _, p := range []api.Pod{pod("managed", true), pod("bare", false)} {
		_, err := f.raw.Pods.Create(t.Context(), p.Key(), p)
		require.NoError(t, err)
	}
	code, _, errOut := f.run(t, "drain", "n1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "cannot delete Pods that declare no controller (use --force to override): default/bare")
	entries, _, err := f.raw.Pods.List(t.Context())
	require.NoError(t, err)
	assert.Len(t, entries, 2, "nothing evicted")
	n, _, _, err := f.raw.Nodes.Get(t.Context(), "n1")
	require.NoError(t, err)
	assert.True(t, n.Spec.Unschedulable, "cordoned first, as kubectl does")

	code, out, errOut := f.run(t, "drain", "n1", "--force")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "node/n1 already cordoned\n")
	assert.Contains(t, out, "evicting pod default/bare\n")
	assert.Contains(t, out, "node/n1 drained\n")
	entries, _, err = f.raw.Pods.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestLogsShouldPrintTheContainersOutput(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	t.Setenv("CLUSTER_LOG_DIR", dir)
	p := api.Pod{Metadata: api.Metadata{Name: "web", Namespace: "default", UID: "u1"}, Spec: api.PodSpec{NodeName: "n1",
		Containers: []api.Container{{Name: "a", Command: []string{"x"}}, {Name: "b", Command: []string{"y"}}}}}
	_, err := f.raw.Pods.Create(t.Context(), p.Key(), p)
	require.NoError(t, err)
	path := agent.LogPath(dir, &p, "b")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("hello from b\n"), 0o600))
	code, _, errOut := f.run(t, "logs", "web")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "a container name must be specified for pod web, choose one of: [a b]")
	code, out, errOut := f.run(t, "logs", "web", "-c", "b")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "hello from b\n", out)
}
