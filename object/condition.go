package object

import (
	"slices"
	"time"
)

// ConditionStatus is whether a condition holds.
type ConditionStatus string

// The statuses of a condition, spelled as Kubernetes spells them.
const (
	// ConditionTrue: the condition holds.
	ConditionTrue ConditionStatus = "True"
	// ConditionFalse: the condition does not hold.
	ConditionFalse ConditionStatus = "False"
	// ConditionUnknown: the controller cannot tell (yet).
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one observation a controller records in a value's status:
// whether something of type Type holds, why, and since when. A status holds
// at most one condition per Type; SetCondition keeps it that way.
type Condition struct {
	// Type names the condition ("Ready", "Available"); unique in a list.
	Type string `json:"type"`
	// Status is whether it holds.
	Status ConditionStatus `json:"status"`
	// Reason is a machine-readable CamelCase word for the status.
	Reason string `json:"reason"`
	// Message is for humans.
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	// ObservedGeneration is the Meta.Generation the controller acted on
	// when it set the condition.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// SetCondition puts c in *conds, replacing the condition of c's Type, or
// appending it if there is none, and reports whether *conds changed.
//
// LastTransitionTime follows the status, not the write: if the condition
// existed with the same Status the old LastTransitionTime is kept (whatever
// c's); otherwise it is c.LastTransitionTime if set, else now. So a
// controller that sets the same condition on every reconcile changes
// nothing and writes nothing.
//
// If anything changed, *conds is set to a new slice; the old backing array,
// which a store or cache may share, is never written to.
func SetCondition(conds *[]Condition, c Condition, now time.Time) (changed bool) {
	i := slices.IndexFunc(*conds, func(old Condition) bool { return old.Type == c.Type })
	switch {
	case i >= 0 && (*conds)[i].Status == c.Status:
		c.LastTransitionTime = (*conds)[i].LastTransitionTime
	case c.LastTransitionTime.IsZero():
		c.LastTransitionTime = now
	}
	if i >= 0 && sameCondition((*conds)[i], c) {
		return false
	}
	out := make([]Condition, len(*conds), len(*conds)+1)
	copy(out, *conds)
	if i >= 0 {
		out[i] = c
	} else {
		out = append(out, c)
	}
	*conds = out
	return true
}

// sameCondition compares with time.Time.Equal: == would tell apart two
// instants that differ only in location or monotonic reading, as a value
// decoded from a store and one built with time.Now do.
func sameCondition(a, b Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(b.LastTransitionTime)
}

// FindCondition returns the condition of type typ, and false if there is
// none.
func FindCondition(conds []Condition, typ string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// IsTrue reports whether the condition of type typ exists with Status
// ConditionTrue; absent and Unknown are not true.
func IsTrue(conds []Condition, typ string) bool {
	c, ok := FindCondition(conds, typ)
	return ok && c.Status == ConditionTrue
}

// RemoveCondition removes the condition of type typ and reports whether
// there was one. It sets *conds to a new slice (nil if none is left) and
// never writes into the old backing array.
func RemoveCondition(conds *[]Condition, typ string) (removed bool) {
	if _, ok := FindCondition(*conds, typ); !ok {
		return false
	}
	var out []Condition
	for _, c := range *conds {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	*conds = out
	return true
}
