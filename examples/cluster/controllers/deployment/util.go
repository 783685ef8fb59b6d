package deployment

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"strconv"
	"strings"

	"github.com/converge-go/converge/examples/cluster/api"
)

// The API's defaults (pkg/apis/apps/v1/defaults.go), applied here to a
// Deployment whose fields are unset.
const (
	DefaultMaxSurge                = "25%"
	DefaultMaxUnavailable          = "25%"
	DefaultRevisionHistoryLimit    = 10
	DefaultProgressDeadlineSeconds = 600
)

// ResolveFenceposts turns a rolling update's maxSurge and maxUnavailable
// (an absolute number, or a percentage of desired) into numbers of pods
// (deployment_util.go ResolveFenceposts): surge rounds up, unavailable
// rounds down, and if both come to 0, unavailable is 1, so that a rollout
// can always move. An empty value is 0. Errors: a value that is neither
// a non-negative integer nor a non-negative percentage.
func ResolveFenceposts(maxSurge, maxUnavailable string, desired int32) (surge, unavailable int32, err error) {
	if surge, err = scaledValue(maxSurge, desired, true); err != nil {
		return 0, 0, fmt.Errorf("maxSurge: %w", err)
	}
	if unavailable, err = scaledValue(maxUnavailable, desired, false); err != nil {
		return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable, nil
}

// scaledValue is intstr's GetScaledValueFromIntOrPercent.
func scaledValue(v string, total int32, roundUp bool) (int32, error) {
	if v == "" {
		return 0, nil
	}
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 {
			return 0, fmt.Errorf("invalid percentage %q", v)
		}
		f := float64(p) * float64(total) / 100
		if roundUp {
			return int32(math.Ceil(f)), nil
		}
		return int32(math.Floor(f)), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid value %q: a non-negative integer or percentage", v)
	}
	return int32(n), nil
}

// isRollingUpdate says whether d rolls (the default) rather than recreates.
func isRollingUpdate(d *api.Deployment) bool {
	return d.Spec.Strategy.Type == "" || d.Spec.Strategy.Type == api.RollingUpdateStrategy
}

// fenceposts resolves d's bounds with the API's defaults for unset ones.
func fenceposts(d *api.Deployment) (surge, unavailable int32, err error) {
	ms, mu := DefaultMaxSurge, DefaultMaxUnavailable
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		ms, mu = cmp.Or(ru.MaxSurge, ms), cmp.Or(ru.MaxUnavailable, mu)
	}
	return ResolveFenceposts(ms, mu, api.Replicas(d.Spec.Replicas))
}

// maxSurge is d's surge in pods, 0 for Recreate (deployment_util.go
// MaxSurge); a bad value was caught by Reconcile's check.
func maxSurge(d *api.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, _, _ := fenceposts(d)
	return s
}

// maxUnavailable is d's unavailability bound in pods, at most its replicas,
// 0 for Recreate or no replicas (deployment_util.go MaxUnavailable).
func maxUnavailable(d *api.Deployment) int32 {
	replicas := api.Replicas(d.Spec.Replicas)
	if !isRollingUpdate(d) || replicas == 0 {
		return 0
	}
	_, u, _ := fenceposts(d)
	return min(u, replicas)
}

func revisionHistoryLimit(d *api.Deployment) int32 {
	if d.Spec.RevisionHistoryLimit == nil {
		return DefaultRevisionHistoryLimit
	}
	return *d.Spec.RevisionHistoryLimit
}

func progressDeadlineSeconds(d *api.Deployment) int32 {
	if d.Spec.ProgressDeadlineSeconds == nil {
		return DefaultProgressDeadlineSeconds
	}
	return *d.Spec.ProgressDeadlineSeconds
}

// ComputeHash is the pod-template-hash of a template: a 32-bit FNV-1a hash
// of it, spelled in Kubernetes' alphabet for generated names
// (pkg/controller/controller_utils.go ComputeHash). Kubernetes hashes a
// spew dump of the Go value; this hashes its JSON, which is as stable
// (map keys sorted) and needs no reflection library. A collision count
// above 0 is hashed in too, to step past a name another ReplicaSet took.
func ComputeHash(t api.PodTemplateSpec, collisionCount int32) string {
	b, _ := json.Marshal(t) // plain data: cannot fail
	h := fnv.New32a()
	_, _ = h.Write(b)
	if collisionCount > 0 {
		_, _ = h.Write([]byte{byte(collisionCount), byte(collisionCount >> 8), byte(collisionCount >> 16), byte(collisionCount >> 24)})
	}
	return safeEncode(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// safeEncode is apimachinery's rand.SafeEncodeString: each byte mapped
// into an alphabet without vowels, so that no word is spelled.
func safeEncode(s string) string {
	const alphanums = "bcdfghjklmnpqrstvwxz2456789"
	r := make([]byte, len(s))
	for i, b := range []byte(s) {
		r[i] = alphanums[int(b)%len(alphanums)]
	}
	return string(r)
}

// equalIgnoreHash reports whether two templates are the same but for the
// pod-template-hash label (deployment_util.go EqualIgnoreHash). Compared
// as JSON, an empty map equals a missing one, as apimachinery's semantic
// equality has it.
func equalIgnoreHash(a, b api.PodTemplateSpec) bool {
	strip := func(t api.PodTemplateSpec) string {
		t.Metadata.Labels = maps.Clone(t.Metadata.Labels)
		delete(t.Metadata.Labels, api.PodTemplateHashLabel)
		out, _ := json.Marshal(t)
		return string(out)
	}
	return strip(a) == strip(b)
}

// revision is the revision annotation of rs, 0 if it has none or a bad one.
func revision(rs *api.ReplicaSet) int64 {
	v, err := strconv.ParseInt(rs.Annotations[api.RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// withLabel returns labels with one more.
func withLabel(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

// withAnnotation returns a copy of annotations with k set to v, and whether
// that changed anything.
func withAnnotation(annotations map[string]string, k, v string) (map[string]string, bool) {
	if old, ok := annotations[k]; ok && old == v {
		return annotations, false
	}
	out := maps.Clone(annotations)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out, true
}
