package kube_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/kube"
	"github.com/converge-go/converge/object"
)

// protoConfigMap is a ConfigMap's data, read from protobuf through the
// generated code of k8s.io/api, written as JSON.
type protoConfigMap struct {
	Data map[string]string `json:"data,omitempty"`
}

func (c *protoConfigMap) Unmarshal(b []byte) error {
	var cm corev1.ConfigMap
	if err := cm.Unmarshal(b); err != nil {
		return err
	}
	c.Data = cm.Data
	return nil
}

// protoSecret is a Secret's type and data, read from protobuf.
type protoSecret struct {
	Type string            `json:"type"`
	Data map[string][]byte `json:"data,omitempty"`
}

func (s *protoSecret) Unmarshal(b []byte) error {
	var sec corev1.Secret
	if err := sec.Unmarshal(b); err != nil {
		return err
	}
	s.Type, s.Data = string(sec.Type), sec.Data
	return nil
}

// protobufReads checks that Stores read protobuf and never JSON: a server
// that fell back to JSON would pass the suites too. Each Store is checked
// for JSON when its test ends, the count of protobuf reads of them all
// when the top test does (a subtest may read nothing).
type protobufReads struct{ n atomic.Uint64 }

func checkProtobufReads(t *testing.T) *protobufReads {
	r := &protobufReads{}
	t.Cleanup(func() { assert.Positive(t, r.n.Load(), "responses read as protobuf") })
	return r
}

func (r *protobufReads) add(t *testing.T, s interface{ Stats() kube.Stats }) {
	t.Helper()
	t.Cleanup(func() {
		st := s.Stats()
		r.n.Add(st.ProtobufReads)
		assert.Zero(t, st.JSONReads, "responses read as JSON")
	})
}

// TestStoreShouldPassTheStoreConformanceSuiteOnConfigMapsReadAsProtobuf
// runs the Store suite with every List, Watch and Get read as protobuf.
func TestStoreShouldPassTheStoreConformanceSuiteOnConfigMapsReadAsProtobuf(t *testing.T) {
	cfg := restConfig(t)
	reads := checkProtobufReads(t)
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, protoConfigMap]{
		New: func(t *testing.T) informer.Store[string, protoConfigMap] {
			s, err := kube.New[protoConfigMap](cfg, configMapsGVR,
				kube.WithNamespace[protoConfigMap](namespace(t, cfg)), kube.WithProtobuf[protoConfigMap]())
			require.NoError(t, err)
			reads.add(t, s)
			return s
		},
		DeletesCarryValue: true,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) protoConfigMap { return protoConfigMap{Data: map[string]string{"n": strconv.Itoa(i)}} },
	})
}

// TestStoreShouldPassTheStoreConformanceSuiteOnSecretsReadAsProtobuf runs
// it on secrets, served from etcd, where a compaction gives 410 Gone.
func TestStoreShouldPassTheStoreConformanceSuiteOnSecretsReadAsProtobuf(t *testing.T) {
	cfg := restConfig(t)
	etcd := testserver.KubeEtcd(t)
	reads := checkProtobufReads(t)
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, protoSecret]{
		New: func(t *testing.T) informer.Store[string, protoSecret] {
			s, err := kube.New[protoSecret](cfg, secretsGVR,
				kube.WithNamespace[protoSecret](namespace(t, cfg)), kube.WithProtobuf[protoSecret]())
			require.NoError(t, err)
			reads.add(t, s)
			return s
		},
		Expire: func(ctx context.Context, _ informer.Store[string, protoSecret]) error {
			return compactKubeEtcd(ctx, etcd[0])
		},
		DeletesCarryValue: true,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) protoSecret {
			return protoSecret{Type: "Opaque", Data: map[string][]byte{"n": []byte(strconv.Itoa(i))}}
		},
	})
}

// The typed API structs read the same from protobuf as from JSON, as
// values and as pointers: List, Watch and Get.
func TestATypedConfigMapShouldReadTheSameFromProtobufAsFromJSON(t *testing.T) {
	cfg := restConfig(t)
	ns := namespace(t, cfg)
	ctx := t.Context()
	js, err := kube.New[corev1.ConfigMap](cfg, configMapsGVR, kube.WithNamespace[corev1.ConfigMap](ns))
	require.NoError(t, err)
	pb, err := kube.New[corev1.ConfigMap](cfg, configMapsGVR,
		kube.WithNamespace[corev1.ConfigMap](ns), kube.WithProtobuf[corev1.ConfigMap]())
	require.NoError(t, err)
	pp, err := kube.New[*corev1.ConfigMap](cfg, configMapsGVR,
		kube.WithNamespace[*corev1.ConfigMap](ns), kube.WithProtobufPointer[corev1.ConfigMap]())
	require.NoError(t, err)
	reads := checkProtobufReads(t)
	reads.add(t, pb)
	reads.add(t, pp)

	cm := corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"},
			Finalizers: []string{finalizer}},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
	}
	rev, err := pp.Create(ctx, "c", &cm)
	require.NoError(t, err, "writes are JSON, from a pointer too")
	t.Cleanup(func() { _, _ = js.Delete(t.Context(), "c", 0) })

	want, wantRev, ok, err := js.Get(ctx, "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, rev, wantRev)
	want.TypeMeta = metav1.TypeMeta{} // a protobuf object has its type in the envelope

	got, gotRev, ok, err := pb.Get(ctx, "c")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, wantRev, gotRev)
	assert.Equal(t, want, got, "Get")
	gotp, _, _, err := pp.Get(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, &want, gotp, "Get of a pointer")

	entries, listRev, err := pb.List(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, informer.Entry[string, corev1.ConfigMap]{Key: "c", Value: want, Revision: rev}, entries[0], "List")

	events, done := watching(t, informer.Source[string, *corev1.ConfigMap](pp), listRev)
	cm2 := want.DeepCopy()
	cm2.Data["k"] = "w"
	rev2, err := pb.Update(ctx, "c", *cm2, rev)
	require.NoError(t, err)
	ev := next(t, events, done)
	require.NoError(t, ev.Err)
	assert.Equal(t, informer.Put, ev.Type)
	assert.Equal(t, rev2, ev.Revision)
	assert.Equal(t, "w", ev.Value.Data["k"], "Watch")
	assert.Equal(t, []string{finalizer}, ev.Value.Finalizers)
}

// deployment is a Deployment with converge's object.Meta, read from
// protobuf: a built-in resource with a status subresource.
type deployment struct {
	object.Meta
	Spec   appsv1.DeploymentSpec   `json:"spec"`
	Status appsv1.DeploymentStatus `json:"status,omitzero"`
}

func (d *deployment) Unmarshal(b []byte) error {
	var x appsv1.Deployment
	if err := x.Unmarshal(b); err != nil {
		return err
	}
	d.Spec, d.Status = x.Spec, x.Status
	return nil
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func deploymentSpec(replicas int32) appsv1.DeploymentSpec {
	labels := map[string]string{"app": "d"}
	return appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
		},
	}
}

// Read as protobuf, a built-in resource keeps the status and finalizer
// behaviour of the JSON path: spec and status are both written, a value
// read back has the server's generation, finalizers and deletion mark,
// RequestDelete marks and Finalize deletes.
func TestADeploymentReadAsProtobufShouldKeepItsStatusAndFinalizers(t *testing.T) {
	cfg := restConfig(t)
	ctx := t.Context()
	s, err := kube.New[deployment](cfg, deploymentsGVR,
		kube.WithNamespace[deployment](namespace(t, cfg)), kube.WithProtobuf[deployment]())
	require.NoError(t, err)
	checkProtobufReads(t).add(t, s)

	d := deployment{Spec: deploymentSpec(1), Status: appsv1.DeploymentStatus{Replicas: 1, ObservedGeneration: 1}}
	d.AddFinalizer(finalizer)
	r1, err := s.Create(ctx, "d", d)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = s.Delete(context.Background(), "d", 0) })
	got, rev, ok, err := s.Get(ctx, "d")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, r1, rev, "Create returns the revision of its status write")
	assert.Equal(t, appsv1.DeploymentStatus{Replicas: 1, ObservedGeneration: 1}, got.Status, "the status given to Create")
	assert.Equal(t, int64(1), got.Generation)
	assert.Equal(t, []string{finalizer}, got.Finalizers)

	_, op, err := informer.Update(ctx, s, "d", func(d *deployment) error {
		d.Spec.Replicas = new(int32(2))
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op)
	got, _, _, err = s.Get(ctx, "d")
	require.NoError(t, err)
	assert.Equal(t, int32(2), *got.Spec.Replicas)
	assert.Equal(t, int64(2), got.Generation, "the server bumps the generation on a spec change")
	assert.Equal(t, int32(1), got.Status.Replicas, "a spec change keeps the status")

	_, _, err = informer.Update(ctx, s, "d", func(d *deployment) error {
		d.Status.Replicas, d.Status.ObservedGeneration = 2, 2
		return nil
	})
	require.NoError(t, err)
	got, _, _, err = s.Get(ctx, "d")
	require.NoError(t, err)
	assert.Equal(t, appsv1.DeploymentStatus{Replicas: 2, ObservedGeneration: 2}, got.Status, "a status-only Update")

	_, op, err = informer.RequestDelete(ctx, s, "d")
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op, "an object with a finalizer is marked, not deleted")
	got, _, ok, err = s.Get(ctx, "d")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, got.Deleting(), "deletionTimestamp, read from protobuf")
	live, err := informer.Finalize(ctx, s, "d", &got, finalizer, func(context.Context) (bool, error) { return true, nil })
	require.NoError(t, err)
	assert.False(t, live)
	_, _, ok, err = s.Get(ctx, "d")
	require.NoError(t, err)
	assert.False(t, ok, "removing the last finalizer deleted the object")
}

// protoWidget is a Widget that claims a protobuf decoder: the server has
// no protobuf for a custom resource, and answers JSON.
type protoWidget struct{ Widget }

func (w *protoWidget) Unmarshal([]byte) error { return errors.New("a custom resource has no protobuf") }

// A Store asked for protobuf reads a custom resource as JSON, through the
// codec, since the server sends JSON: WithProtobuf changes nothing there.
func TestAStoreWithProtobufShouldReadACustomResourceAsJSON(t *testing.T) {
	cfg := restConfig(t)
	js := widgets(t, cfg)
	ctx := t.Context()
	w := Widget{Spec: WidgetSpec{Replicas: 2}, Status: WidgetStatus{Ready: 1}}
	w.AddFinalizer(finalizer)
	rev, err := js.Create(ctx, "w", w)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = js.Delete(context.Background(), "w", 0) })
	pb, err := kube.New[protoWidget](cfg, widgetsGVR, kube.WithNamespace[protoWidget](js.Namespace()), kube.WithProtobuf[protoWidget]())
	require.NoError(t, err)

	want, _, _, err := js.Get(ctx, "w")
	require.NoError(t, err)
	got, gotRev, ok, err := pb.Get(ctx, "w")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rev, gotRev)
	assert.Equal(t, want, got.Widget)
	entries, _, err := pb.List(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.NoError(t, entries[0].Err)
	assert.Equal(t, want, entries[0].Value.Widget)
	st := pb.Stats()
	assert.Zero(t, st.ProtobufReads)
	assert.Positive(t, st.JSONReads)
}

// pickyConfigMap fails to decode a ConfigMap with data["bad"].
type pickyConfigMap struct{ protoConfigMap }

func (c *pickyConfigMap) Unmarshal(b []byte) error {
	if err := c.protoConfigMap.Unmarshal(b); err != nil {
		return err
	}
	if _, bad := c.Data["bad"]; bad {
		return errors.New("bad data")
	}
	return nil
}

// An object that does not decode from protobuf is a bad key, keyed from
// its metadata: the list goes on, as from JSON.
func TestAnObjectThatDoesNotDecodeFromProtobufShouldBeABadKeyOfTheList(t *testing.T) {
	cfg := restConfig(t)
	ctx := t.Context()
	s, err := kube.New[pickyConfigMap](cfg, configMapsGVR,
		kube.WithNamespace[pickyConfigMap](namespace(t, cfg)), kube.WithProtobuf[pickyConfigMap]())
	require.NoError(t, err)
	checkProtobufReads(t).add(t, s)
	_, err = s.Create(ctx, "good", pickyConfigMap{protoConfigMap{Data: map[string]string{"n": "1"}}})
	require.NoError(t, err)
	badRev, err := s.Create(ctx, "bad", pickyConfigMap{protoConfigMap{Data: map[string]string{"bad": "1"}}})
	require.NoError(t, err)

	entries, _, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for _, e := range entries {
		if e.Key == "good" {
			assert.NoError(t, e.Err)
			assert.Equal(t, "1", e.Value.Data["n"])
			continue
		}
		var de *kube.DecodeError
		require.ErrorAs(t, e.Err, &de)
		assert.Equal(t, "bad", de.Key)
		assert.Equal(t, badRev, de.Revision)
		assert.EqualError(t, de.Err, "bad data")
	}
	_, _, _, err = s.Get(ctx, "bad")
	var de *kube.DecodeError
	assert.ErrorAs(t, err, &de, "Get of an object that does not decode")
	assert.Equal(t, uint64(2), s.Stats().DecodeErrors)
}
