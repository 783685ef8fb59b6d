package api

// DefaultNamespace is the namespace of an object that names none.
const DefaultNamespace = "default"

// Default fills in what the Kubernetes API server fills in before it
// validates a write of obj (a *Deployment, *ReplicaSet, *Pod, *Node or
// *Lease), in place: the namespace "default"; a Deployment's 1 replica,
// RollingUpdate strategy with 25% surge and 25% unavailable,
// revisionHistoryLimit 10 and progressDeadlineSeconds 600
// (pkg/apis/apps/v1/defaults.go); a ReplicaSet's 1 replica; restartPolicy
// Always in every pod spec (pkg/apis/core/v1/defaults.go); and a Pod's
// not-ready and unreachable NoExecute tolerations of tolerationSeconds,
// unless it tolerates those taints itself, as the DefaultTolerationSeconds
// admission plugin adds them
// (plugin/pkg/admission/defaulttolerationseconds/admission.go). A negative
// tolerationSeconds adds none. Anything already set is kept.
func Default(obj any, tolerationSeconds int64) {
	if m := MetaOf(obj); m != nil {
		if _, node := obj.(*Node); !node && m.Namespace == "" {
			m.Namespace = DefaultNamespace
		}
	}
	switch o := obj.(type) {
	case *Deployment:
		s := &o.Spec
		s.Replicas = orDefault(s.Replicas, 1)
		if s.Strategy.Type == "" {
			s.Strategy.Type = RollingUpdateStrategy
		}
		if s.Strategy.Type == RollingUpdateStrategy {
			ru := RollingUpdateDeployment{}
			if s.Strategy.RollingUpdate != nil {
				ru = *s.Strategy.RollingUpdate
			}
			ru.MaxSurge = cmpOr(ru.MaxSurge, "25%")
			ru.MaxUnavailable = cmpOr(ru.MaxUnavailable, "25%")
			s.Strategy.RollingUpdate = &ru
		}
		s.RevisionHistoryLimit = orDefault(s.RevisionHistoryLimit, 10)
		s.ProgressDeadlineSeconds = orDefault(s.ProgressDeadlineSeconds, 600)
		defaultPodSpec(&s.Template.Spec)
	case *ReplicaSet:
		o.Spec.Replicas = orDefault(o.Spec.Replicas, 1)
		defaultPodSpec(&o.Spec.Template.Spec)
	case *Pod:
		defaultPodSpec(&o.Spec)
		if tolerationSeconds >= 0 {
			o.Spec.Tolerations = defaultTolerations(o.Spec.Tolerations, tolerationSeconds)
		}
	}
}

func defaultPodSpec(s *PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = RestartAlways
	}
}

// defaultTolerations returns ts with the not-ready and unreachable
// NoExecute tolerations appended where ts tolerates neither already. It
// never writes into ts, which a store may share.
func defaultTolerations(ts []Toleration, seconds int64) []Toleration {
	tolerates := func(key string) bool {
		for _, t := range ts {
			if (t.Key == key || t.Key == "") && (t.Effect == TaintNoExecute || t.Effect == "") {
				return true
			}
		}
		return false
	}
	var add []Toleration
	for _, key := range []string{TaintNodeNotReady, TaintNodeUnreachable} {
		if !tolerates(key) {
			s := seconds
			add = append(add, Toleration{Key: key, Operator: "Exists", Effect: TaintNoExecute, TolerationSeconds: &s})
		}
	}
	if len(add) == 0 {
		return ts
	}
	return append(append([]Toleration(nil), ts...), add...)
}

func orDefault(p *int32, v int32) *int32 {
	if p != nil {
		return p
	}
	return &v
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
