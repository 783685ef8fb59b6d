package object_test

import (
	"fmt"
	"time"

	"github.com/converge-go/converge/object"
)

// Widget is a user's value type: embedding object.Meta gives it a
// generation, finalizers and a deletion request, inline in its JSON.
type Widget struct {
	object.Meta
	Size       int                `json:"size"`
	Conditions []object.Condition `json:"conditions,omitempty"`
}

// A controller adds its finalizer before it acts outside the store, and
// removes it once it has cleaned up after a deletion request.
func ExampleMeta_AddFinalizer() {
	var w Widget
	fmt.Println(w.AddFinalizer("widgets.example.com/cleanup"), w.Finalizers)
	fmt.Println(w.AddFinalizer("widgets.example.com/cleanup"))

	w.DeletionRequested = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fmt.Println(w.Deleting(), w.AddFinalizer("another"))
	fmt.Println(w.RemoveFinalizer("widgets.example.com/cleanup"), len(w.Finalizers))
	// Output:
	// true [widgets.example.com/cleanup]
	// false
	// true false
	// true 0
}

// SetCondition moves LastTransitionTime only when the status changes, and
// reports whether anything changed, so that a controller writes only then.
func ExampleSetCondition() {
	var w Widget
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := object.Condition{Type: "Ready", Status: object.ConditionTrue, Reason: "Provisioned", ObservedGeneration: 1}

	fmt.Println(object.SetCondition(&w.Conditions, ready, t0))
	fmt.Println(object.SetCondition(&w.Conditions, ready, t0.Add(time.Hour)))
	c, _ := object.FindCondition(w.Conditions, "Ready")
	fmt.Println(c.LastTransitionTime.Format(time.Kitchen), object.IsTrue(w.Conditions, "Ready"))
	// Output:
	// true
	// false
	// 12:00AM true
}
