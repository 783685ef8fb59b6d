package shard_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader/shard"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("replica-%d", i)
	}
	return out
}

func moved(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func TestAssignShouldGiveEveryBucketAnOwnerAndNoMemberMoreThanItsShare(t *testing.T) {
	for _, buckets := range []int{1, 7, 64, 256} {
		for n := 1; n <= 12; n++ {
			owners := shard.Assign(names(n), buckets)
			require.Len(t, owners, buckets)
			load := map[string]int{}
			for _, o := range owners {
				require.NotEmpty(t, o)
				load[o]++
			}
			share := (buckets + n - 1) / n
			for m, l := range load {
				assert.LessOrEqual(t, l, share, "B=%d n=%d: %s has %d buckets", buckets, n, m, l)
			}
		}
	}
}

func TestAssignShouldNotDependOnTheOrderOrRepetitionOfMembers(t *testing.T) {
	ms := names(5)
	want := shard.Assign(ms, 64)
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	assert.Equal(t, want, shard.Assign(rev, 64))
	assert.Equal(t, want, shard.Assign(append(rev, ms...), 64))
}

func TestAssignWithoutMembersShouldLeaveEveryBucketUnowned(t *testing.T) {
	assert.Equal(t, []string{"", "", ""}, shard.Assign(nil, 3))
}

// A join or a leave should move about B/n buckets, not B: plain
// rendezvous moves exactly the joiner's or leaver's share; the load bound
// costs a few more, which this measures.
func TestAssignShouldMoveAboutAShareOfTheBucketsPerMembershipChange(t *testing.T) {
	const buckets = 64
	worst := 0.0
	for n := 1; n < 12; n++ {
		before, after := shard.Assign(names(n), buckets), shard.Assign(names(n+1), buckets)
		share := float64(buckets) / float64(n+1)
		join := moved(before, after)
		ratio := float64(join) / share
		worst = max(worst, ratio)
		t.Logf("n=%d→%d: %d buckets moved, B/n=%.1f, ratio %.2f", n, n+1, join, share, ratio)
		assert.LessOrEqual(t, ratio, 3.0, "join %d→%d moved %d of %d buckets", n, n+1, join, buckets)
		// A leave of any one member.
		for leaver := range n + 1 {
			rest := slices.Delete(names(n+1), leaver, leaver+1)
			leave := moved(after, shard.Assign(rest, buckets))
			assert.LessOrEqual(t, float64(leave), 3*share, "leave of %d from %d moved %d of %d buckets", leaver, n+1, leave, buckets)
			worst = max(worst, float64(leave)/share)
		}
	}
	t.Logf("worst moved/(B/n): %.2f", worst)
}
