package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// FieldError is one problem with one field, worded as the Kubernetes API
// server words it: "spec.replicas: Invalid value: -1: must be greater than
// or equal to 0".
type FieldError struct {
	Field string
	// Type is "Invalid value", "Required value", "Unsupported value" or
	// "Forbidden".
	Type   string
	Value  any // shown for Invalid and Unsupported values
	Detail string
}

// Error says the field, the problem and, for an invalid value, the value.
func (e FieldError) Error() string {
	switch e.Type {
	case "Required value", "Forbidden":
		if e.Detail == "" {
			return e.Field + ": " + e.Type
		}
		return e.Field + ": " + e.Type + ": " + e.Detail
	}
	return fmt.Sprintf("%s: %s: %s: %s", e.Field, e.Type, showValue(e.Value), e.Detail)
}

func showValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]string:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return fmt.Sprint(v)
}

// InvalidError is a refused object and every problem found with it:
// `Deployment.apps "web" is invalid: spec.replicas: ...`.
type InvalidError struct {
	Kind, Name string
	Errs       []FieldError
}

// Error names the object and lists every problem, as kubectl shows them.
func (e *InvalidError) Error() string {
	kind := e.Kind
	if g, _, ok := strings.Cut(APIVersions[e.Kind], "/"); ok {
		kind += "." + g
	}
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = fe.Error()
	}
	if len(msgs) == 1 {
		return fmt.Sprintf("%s %q is invalid: %s", kind, e.Name, msgs[0])
	}
	return fmt.Sprintf("%s %q is invalid: [%s]", kind, e.Name, strings.Join(msgs, ", "))
}

type fieldErrs []FieldError

func (f *fieldErrs) invalid(field string, v any, detail string) {
	*f = append(*f, FieldError{Field: field, Type: "Invalid value", Value: v, Detail: detail})
}
func (f *fieldErrs) required(field, detail string) {
	*f = append(*f, FieldError{Field: field, Type: "Required value", Detail: detail})
}
func (f *fieldErrs) unsupported(field string, v string, supported ...string) {
	q := make([]string, len(supported))
	for i, s := range supported {
		q[i] = strconv.Quote(s)
	}
	*f = append(*f, FieldError{Field: field, Type: "Unsupported value", Value: v, Detail: "supported values: " + strings.Join(q, ", ")})
}

// Validate checks obj (a *Deployment, *ReplicaSet, *Pod, *Node or *Lease)
// as the API server does before a write, after Default. It returns nil or
// an *InvalidError listing every problem found.
func Validate(obj any) error {
	var errs fieldErrs
	var kind string
	switch o := obj.(type) {
	case *Deployment:
		kind = KindDeployment
		validateMeta(&errs, o.Metadata, true)
		validateDeployment(&errs, o)
	case *ReplicaSet:
		kind = KindReplicaSet
		validateMeta(&errs, o.Metadata, true)
		validateReplicas(&errs, "spec.replicas", o.Spec.Replicas)
		nonNegative(&errs, "spec.minReadySeconds", int64(o.Spec.MinReadySeconds))
		validateTemplate(&errs, o.Spec.Selector, o.Spec.Template)
	case *Pod:
		kind = KindPod
		validateMeta(&errs, o.Metadata, true)
		validatePodSpec(&errs, "spec", o.Spec, false)
	case *Node:
		kind = KindNode
		validateMeta(&errs, o.Metadata, false)
		validateResources(&errs, "status.capacity", o.Status.Capacity)
		validateResources(&errs, "status.allocatable", o.Status.Allocatable)
		for i, t := range o.Spec.Taints {
			f := fmt.Sprintf("spec.taints[%d]", i)
			if t.Key == "" {
				errs.required(f+".key", "")
			}
			validateEffect(&errs, f+".effect", t.Effect, false)
		}
	case *Lease:
		kind = KindLease
		validateMeta(&errs, o.Metadata, true)
	default:
		return fmt.Errorf("unknown kind %T", obj)
	}
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Kind: kind, Name: MetaOf(obj).Name, Errs: errs}
}

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

const dnsDetail = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"

func validateMeta(errs *fieldErrs, m ObjectMeta, namespaced bool) {
	switch {
	case m.Name == "":
		errs.required("metadata.name", "name is required")
	case len(m.Name) > 253 || !dnsSubdomain.MatchString(m.Name):
		errs.invalid("metadata.name", m.Name, dnsDetail)
	}
	switch {
	case namespaced && m.Namespace == "":
		errs.required("metadata.namespace", "")
	case !namespaced && m.Namespace != "":
		errs.invalid("metadata.namespace", m.Namespace, "not allowed on this type")
	case namespaced && (len(m.Namespace) > 63 || !dnsSubdomain.MatchString(m.Namespace) || strings.Contains(m.Namespace, ".")):
		errs.invalid("metadata.namespace", m.Namespace, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'")
	}
}

func nonNegative(errs *fieldErrs, field string, v int64) {
	if v < 0 {
		errs.invalid(field, v, "must be greater than or equal to 0")
	}
}

func validateReplicas(errs *fieldErrs, field string, r *int32) {
	if r != nil {
		nonNegative(errs, field, int64(*r))
	}
}

func validateDeployment(errs *fieldErrs, d *Deployment) {
	s := d.Spec
	validateReplicas(errs, "spec.replicas", s.Replicas)
	nonNegative(errs, "spec.minReadySeconds", int64(s.MinReadySeconds))
	if s.RevisionHistoryLimit != nil {
		nonNegative(errs, "spec.revisionHistoryLimit", int64(*s.RevisionHistoryLimit))
	}
	if p := s.ProgressDeadlineSeconds; p != nil && *p <= s.MinReadySeconds {
		errs.invalid("spec.progressDeadlineSeconds", *p, "must be greater than minReadySeconds")
	}
	validateTemplate(errs, s.Selector, s.Template)
	switch s.Strategy.Type {
	case RecreateStrategy:
		if s.Strategy.RollingUpdate != nil {
			errs.invalid("spec.strategy.rollingUpdate", "", "may not be specified when strategy `type` is 'Recreate'")
		}
	case RollingUpdateStrategy, "":
		ru := s.Strategy.RollingUpdate
		if ru == nil {
			break
		}
		surge, surgeErr := validateIntOrPercent(errs, "spec.strategy.rollingUpdate.maxSurge", ru.MaxSurge)
		unavail, unavailErr := validateIntOrPercent(errs, "spec.strategy.rollingUpdate.maxUnavailable", ru.MaxUnavailable)
		if surgeErr == nil && unavailErr == nil && surge == 0 && unavail == 0 && ru.MaxSurge != "" && ru.MaxUnavailable != "" {
			errs.invalid("spec.strategy.rollingUpdate.maxUnavailable", ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0")
		}
	default:
		errs.unsupported("spec.strategy.type", s.Strategy.Type, RecreateStrategy, RollingUpdateStrategy)
	}
}

// ParseIntOrPercent parses a rolling update bound: "3" is 3 pods, "25%" is
// 25 percent of the replicas. It fails on anything else and on a negative
// number.
func ParseIntOrPercent(s string) (v int, percent bool, err error) {
	num, percent := strings.CutSuffix(s, "%")
	v, err = strconv.Atoi(num)
	if err != nil || v < 0 {
		return 0, false, fmt.Errorf("%q: want a non-negative integer or a percentage", s)
	}
	return v, percent, nil
}

func validateIntOrPercent(errs *fieldErrs, field, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	v, percent, err := ParseIntOrPercent(s)
	switch {
	case err != nil:
		errs.invalid(field, s, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%'), or a non-negative integer")
	case percent && v > 100:
		errs.invalid(field, s, "must not be greater than 100%")
	}
	return v, err
}

func validateTemplate(errs *fieldErrs, sel LabelSelector, t PodTemplateSpec) {
	if len(sel.MatchLabels) == 0 {
		errs.required("spec.selector", "")
	} else if !sel.Matches(t.Metadata.Labels) {
		errs.invalid("spec.template.metadata.labels", t.Metadata.Labels, "`selector` does not match template `labels`")
	}
	validatePodSpec(errs, "spec.template.spec", t.Spec, true)
}

func validatePodSpec(errs *fieldErrs, f string, s PodSpec, template bool) {
	if len(s.Containers) == 0 {
		errs.required(f+".containers", "")
	}
	names := map[string]bool{}
	for i, c := range s.Containers {
		cf := fmt.Sprintf("%s.containers[%d]", f, i)
		switch {
		case c.Name == "":
			errs.required(cf+".name", "")
		case names[c.Name]:
			errs.invalid(cf+".name", c.Name, "Duplicate value")
		}
		names[c.Name] = true
		if len(c.Command) == 0 || c.Command[0] == "" {
			errs.required(cf+".command", "")
		}
		validateResources(errs, cf+".resources.requests", c.Resources.Requests)
		for j, p := range c.Ports {
			pf := fmt.Sprintf("%s.ports[%d]", cf, j)
			if p.ContainerPort < 1 || p.ContainerPort > 65535 {
				errs.invalid(pf+".containerPort", p.ContainerPort, "must be between 1 and 65535, inclusive")
			}
			if p.HostPort < 0 || p.HostPort > 65535 {
				errs.invalid(pf+".hostPort", p.HostPort, "must be between 1 and 65535, inclusive")
			}
		}
		if pr := c.ReadinessProbe; pr != nil {
			if pr.Exec == nil || len(pr.Exec.Command) == 0 {
				errs.required(cf+".readinessProbe.exec.command", "must specify a handler type")
			}
			nonNegative(errs, cf+".readinessProbe.initialDelaySeconds", int64(pr.InitialDelaySeconds))
			nonNegative(errs, cf+".readinessProbe.periodSeconds", int64(pr.PeriodSeconds))
		}
	}
	switch {
	case template && s.RestartPolicy != RestartAlways && s.RestartPolicy != "":
		errs.unsupported(f+".restartPolicy", s.RestartPolicy, RestartAlways)
	case s.RestartPolicy != RestartAlways && s.RestartPolicy != RestartOnFailure && s.RestartPolicy != RestartNever && s.RestartPolicy != "":
		errs.unsupported(f+".restartPolicy", s.RestartPolicy, RestartAlways, RestartOnFailure, RestartNever)
	}
	for i, t := range s.Tolerations {
		tf := fmt.Sprintf("%s.tolerations[%d]", f, i)
		switch t.Operator {
		case "", "Equal":
			if t.Key == "" {
				errs.invalid(tf+".operator", t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\"")
			}
		case "Exists":
			if t.Value != "" {
				errs.invalid(tf+".operator", t.Operator, "value must be empty when `operator` is 'Exists'")
			}
		default:
			errs.unsupported(tf+".operator", t.Operator, "Equal", "Exists")
		}
		validateEffect(errs, tf+".effect", t.Effect, true)
		if t.TolerationSeconds != nil && t.Effect != TaintNoExecute {
			errs.invalid(tf+".effect", t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
		}
	}
	if g := s.TerminationGracePeriodSeconds; g != nil {
		nonNegative(errs, f+".terminationGracePeriodSeconds", *g)
	}
}

func validateEffect(errs *fieldErrs, f, e string, emptyOK bool) {
	switch e {
	case TaintNoSchedule, TaintPreferNoSchedule, TaintNoExecute:
	case "":
		if !emptyOK {
			errs.required(f, "")
		}
	default:
		errs.unsupported(f, e, TaintNoExecute, TaintNoSchedule, TaintPreferNoSchedule)
	}
}

func validateResources(errs *fieldErrs, f string, rl ResourceList) {
	for name, q := range rl {
		if _, err := q.Milli(); err != nil {
			errs.invalid(f+"."+name, string(q), "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
		}
	}
}
