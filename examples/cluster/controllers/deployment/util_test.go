package deployment

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
)

func TestResolveFencepostsShouldRoundSurgeUpAndUnavailableDownAndNeverLeaveBothAtZero(t *testing.T) {
	for _, tc := range []struct {
		surge, unavailable string
		desired            int32
		wantS, wantU       int32
	}{
		{"25%", "25%", 10, 3, 2}, // 2.5 up, 2.5 down
		{"25%", "25%", 4, 1, 1},
		{"25%", "25%", 1, 1, 0},
		{"1%", "1%", 2, 1, 0},  // the doc's cases: surge rounds up to 1
		{"0%", "1%", 2, 0, 1},  // both 0: unavailable becomes 1
		{"0", "0", 5, 0, 1},    // likewise for absolute zeros
		{"0%", "25%", 3, 0, 1}, // 0.75 down is 0: then 1
		{"2", "3", 10, 2, 3},
		{"100%", "0%", 3, 3, 0},
		{"", "", 3, 0, 1},
		{"50%", "50%", 0, 0, 1},
	} {
		s, u, err := ResolveFenceposts(tc.surge, tc.unavailable, tc.desired)
		require.NoError(t, err)
		assert.Equal(t, [2]int32{tc.wantS, tc.wantU}, [2]int32{s, u}, "surge %q unavailable %q of %d", tc.surge, tc.unavailable, tc.desired)
	}
}

func TestResolveFencepostsShouldRejectWhatIsNeitherANumberNorAPercentage(t *testing.T) {
	for _, bad := range [][2]string{{"x", "1"}, {"1", "-1"}, {"-5%", "1"}, {"1", "%"}, {"1.5", "1"}} {
		_, _, err := ResolveFenceposts(bad[0], bad[1], 10)
		assert.Error(t, err, "%q", bad)
	}
}

func TestTheTemplateHashShouldBeStableAndChangeWithTheTemplate(t *testing.T) {
	a := api.PodTemplateSpec{Metadata: api.TemplateMeta{Labels: map[string]string{"app": "web", "tier": "x"}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Command: []string{"sleep", "1"}}}}}
	b := a
	b.Metadata.Labels = map[string]string{"tier": "x", "app": "web"} // same map, another insertion order
	assert.Equal(t, ComputeHash(a, 0), ComputeHash(b, 0))
	assert.Regexp(t, `^[bcdfghjklmnpqrstvwxz2456789]+$`, ComputeHash(a, 0))
	c := a
	c.Spec.Containers = []api.Container{{Name: "c", Command: []string{"sleep", "2"}}}
	assert.NotEqual(t, ComputeHash(a, 0), ComputeHash(c, 0))
	assert.NotEqual(t, ComputeHash(a, 0), ComputeHash(a, 1), "a collision count moves the hash")
}

func TestTemplatesShouldBeEqualWhateverTheirPodTemplateHashLabel(t *testing.T) {
	a := api.PodTemplateSpec{Metadata: api.TemplateMeta{Labels: map[string]string{"app": "web"}}}
	b := api.PodTemplateSpec{Metadata: api.TemplateMeta{Labels: map[string]string{"app": "web", api.PodTemplateHashLabel: "abc"}}}
	assert.True(t, equalIgnoreHash(a, b))
	b.Metadata.Labels["app"] = "other"
	assert.False(t, equalIgnoreHash(a, b))
}
