package apiserver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/converge-go/converge/examples/cluster/api"
)

// A field selector, as Kubernetes parses it (k8s.io/apimachinery
// pkg/fields/selector.go, ParseSelector): requirements separated by
// commas, each FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE, that must all
// hold; empty terms are skipped. The fields each kind can be selected by
// are Kubernetes' (pkg/registry/core/pod/strategy.go ToSelectableFields
// for pods, pkg/registry/core/node/strategy.go for nodes, and every
// object's metadata.name and metadata.namespace), fewer of them.
type requirement struct {
	field, value string
	not          bool
}

// fieldMatcher returns whether a V meets selector, or an error naming a
// term that does not parse or a field V cannot be selected by.
func fieldMatcher[V any](selector string) (func(*V) bool, error) {
	var reqs []requirement
	var zero V
	for term := range strings.SplitSeq(selector, ",") {
		if term == "" {
			continue
		}
		var r requirement
		var ok bool
		for _, op := range []string{"!=", "==", "="} {
			if r.field, r.value, ok = strings.Cut(term, op); ok {
				r.not = op == "!="
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("invalid selector: %q; can't understand %q", selector, term)
		}
		if _, known := fieldValue(&zero, r.field); !known {
			return nil, fmt.Errorf("field label not supported: %s", r.field)
		}
		reqs = append(reqs, r)
	}
	return func(v *V) bool {
		for _, r := range reqs {
			if got, _ := fieldValue(v, r.field); (got == r.value) == r.not {
				return false
			}
		}
		return true
	}, nil
}

// fieldValue returns the value of a selectable field of v, and false if v
// cannot be selected by field.
func fieldValue(v any, field string) (string, bool) {
	switch o := v.(type) {
	case *api.Pod:
		switch field {
		case "spec.nodeName":
			return o.Spec.NodeName, true
		case "spec.restartPolicy":
			return o.Spec.RestartPolicy, true
		case "status.phase":
			return o.Status.Phase, true
		}
	case *api.Node:
		if field == "spec.unschedulable" {
			return strconv.FormatBool(o.Spec.Unschedulable), true
		}
	}
	if m := api.MetaOf(v); m != nil {
		switch field {
		case "metadata.name":
			return m.Name, true
		case "metadata.namespace":
			return m.Namespace, true
		}
	}
	return "", false
}
