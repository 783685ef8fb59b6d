package kube_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/kube"
	"github.com/converge-go/converge/object"
)

// Widget is a custom resource with a status subresource: a spec the
// server counts generations of, and a status a PUT of the object ignores.
type Widget struct {
	object.Meta
	Spec   WidgetSpec   `json:"spec"`
	Status WidgetStatus `json:"status,omitzero"`
}

type WidgetSpec struct {
	Replicas int `json:"replicas"`
}

type WidgetStatus struct {
	Ready              int   `json:"ready,omitempty"`
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ObjectSpec makes *Widget an object.SpecObject.
func (w *Widget) ObjectSpec() any { return w.Spec }

var (
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetsGVR = schema.GroupVersionResource{Group: "test.converge.dev", Version: "v1", Resource: "widgets"}
)

var widgetCRD = map[string]any{
	"spec": map[string]any{
		"group": "test.converge.dev",
		"scope": "Namespaced",
		"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
		"versions": []any{map[string]any{
			"name": "v1", "served": true, "storage": true,
			"subresources": map[string]any{"status": map[string]any{}},
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"spec":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
				},
			}},
		}},
	},
}

var widgetsOnce sync.Mutex

// widgets returns a Store of Widgets in a fresh namespace, creating the
// CustomResourceDefinition if it does not exist and waiting until the
// server serves it.
func widgets(t *testing.T, cfg *rest.Config) *kube.Store[Widget] {
	t.Helper()
	widgetsOnce.Lock()
	defer widgetsOnce.Unlock()
	crds, err := kube.New[map[string]any](cfg, crdGVR)
	require.NoError(t, err)
	_, _, ok, err := crds.Get(t.Context(), "widgets.test.converge.dev")
	require.NoError(t, err)
	if !ok {
		_, err = crds.Create(t.Context(), "widgets.test.converge.dev", widgetCRD)
		require.NoError(t, err, "create the Widget CRD")
	}
	s, err := kube.New[Widget](cfg, widgetsGVR, kube.WithNamespace[Widget](namespace(t, cfg)))
	require.NoError(t, err)
	// The server serves a new CRD's resource a moment after the create
	// returns: the first List that succeeds says it does.
	require.Eventually(t, func() bool {
		_, _, err := s.List(t.Context())
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the Widget resource is not served")
	return s
}
