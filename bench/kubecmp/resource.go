package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The resources a run can measure the controller over (-resource).
const (
	// resourceConfigMaps: the reconciler copies data[valueKey] into the
	// annotation doneAnnotation (one PUT of the object). controller-runtime
	// reads built-in types as protobuf, converge as JSON.
	resourceConfigMaps = "configmaps"
	// resourceCRD: BenchItems, a custom resource with a status subresource;
	// the reconciler copies spec.v into status.observed (a write of the
	// status). Both libraries read JSON: the server has no protobuf for
	// custom resources.
	resourceCRD = "crd"
	// resourceCRDAnnotation: the same BenchItems, the reconciler writing
	// the annotation doneAnnotation as over ConfigMaps (a PUT of the
	// object), to tell the decoding apart from the status write's cost.
	resourceCRDAnnotation = "crd-annotation"
)

var resources = []string{resourceConfigMaps, resourceCRD, resourceCRDAnnotation}

// isCRD says whether resource is made of BenchItems.
func isCRD(resource string) bool {
	return resource == resourceCRD || resource == resourceCRDAnnotation
}

// benchItemsGV and benchItemsGVR name the custom resource of resourceCRD.
var (
	benchItemsGV  = schema.GroupVersion{Group: "bench.converge.dev", Version: "v1"}
	benchItemsGVR = benchItemsGV.WithResource("benchitems")
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// BenchItem is the custom resource, typed as a controller-runtime user
// declares one (TypeMeta, ObjectMeta, spec, status), which converge
// decodes into as well.
type BenchItem struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BenchItemSpec   `json:"spec"`
	Status            BenchItemStatus `json:"status,omitzero"`
}

// BenchItemSpec holds the desired value and a payload of the size of the
// ConfigMaps' own.
type BenchItemSpec struct {
	V      string `json:"v"`
	Config string `json:"config,omitempty"`
}

// BenchItemStatus holds the value last reconciled.
type BenchItemStatus struct {
	Observed string `json:"observed,omitempty"`
}

// DeepCopyObject makes *BenchItem a runtime.Object for controller-runtime.
func (b *BenchItem) DeepCopyObject() runtime.Object {
	c := *b
	b.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// BenchItemList is the list type controller-runtime's cache needs.
type BenchItemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BenchItem `json:"items"`
}

// DeepCopyObject makes *BenchItemList a runtime.Object.
func (l *BenchItemList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]BenchItem, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*BenchItem)
	}
	return &c
}

// resourceGVR returns the resource the objects of a run are.
func resourceGVR(resource string) (schema.GroupVersionResource, error) {
	switch resource {
	case resourceConfigMaps:
		return configMapsGVR, nil
	case resourceCRD, resourceCRDAnnotation:
		return benchItemsGVR, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("unknown resource %q (want one of %v)", resource, resources)
}

const payload = "replicas: 3\nimage: registry.example.com/app:1.0\n"

// newObject returns object i of resource, with the value "0" and a label
// and a payload as a real one has.
func newObject(resource string, ns string, i int) *unstructured.Unstructured {
	meta := map[string]any{"name": objectName(i), "namespace": ns, "labels": map[string]any{"app": "bench"}}
	if isCRD(resource) {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": benchItemsGV.String(), "kind": "BenchItem", "metadata": meta,
			"spec": map[string]any{"v": "0", "config": payload},
		}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
		"data": map[string]any{valueKey: "0", "config.yaml": payload},
	}}
}

// valuePatch returns the merge patch that sets an object's value.
func valuePatch(resource, value string) map[string]any {
	if isCRD(resource) {
		return map[string]any{"spec": map[string]any{"v": value}}
	}
	return map[string]any{"data": map[string]any{valueKey: value}}
}

// ensureCRD creates the BenchItem CustomResourceDefinition if it does not
// exist and waits until the server serves the resource.
func ensureCRD(ctx context.Context, cfg *rest.Config) error {
	dc, err := dynamic.NewForConfig(noRateLimit(cfg))
	if err != nil {
		return err
	}
	str := map[string]any{"type": "string"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": benchItemsGVR.Resource + "." + benchItemsGV.Group},
		"spec": map[string]any{
			"group": benchItemsGV.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": benchItemsGVR.Resource, "singular": "benchitem", "kind": "BenchItem", "listKind": "BenchItemList"},
			"versions": []any{map[string]any{
				"name": benchItemsGV.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec":   map[string]any{"type": "object", "properties": map[string]any{"v": str, "config": str}},
						"status": map[string]any{"type": "object", "properties": map[string]any{"observed": str}},
					},
				}},
			}},
		},
	}}
	if _, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("create the BenchItem CRD: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dc.Resource(benchItemsGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the BenchItem resource is not served after 30s: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func isAlreadyExists(err error) bool {
	var se interface{ Status() metav1.Status }
	return errors.As(err, &se) && se.Status().Reason == metav1.StatusReasonAlreadyExists
}

// patchValue sets the value of object name with a merge patch.
func patchValue(ctx context.Context, ri dynamic.ResourceInterface, resource, name, value string) error {
	patch, err := json.Marshal(valuePatch(resource, value))
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
