package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/internal/testserver"
)

func TestMain(m *testing.M) {
	// The test binary is also the child the measurement runs.
	if arg := os.Getenv(childEnv); arg != "" {
		if err := child(context.Background(), arg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "kubecmp child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		// client-go's shared transport keeps idle connections, and klog
		// starts its flush daemon at init.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// A small run of every implementation on the real server, over each
// resource: each reconciles every object once and each steady write within
// seconds, so that the full measurement measures working controllers.
// Each reconcile takes one request: a PUT of the object to write an
// annotation, a PUT of the status subresource to write a custom
// resource's status (controller-runtime's Status().Update, converge's
// kube.Store.UpdateStatus).
func TestEveryImplementationShouldReconcileEachObjectAndEachSteadyWriteOnTheRealServer(t *testing.T) {
	kubeconfig := testserver.Kubeconfig(t)
	for _, resource := range resources {
		t.Run(resource, func(t *testing.T) {
			o := options{
				kubeconfig: kubeconfig,
				resource:   resource,
				objects:    []int{30},
				workers:    []int{0},
				reps:       1,
				rate:       20,
				steady:     time.Second,
				timeout:    2 * time.Minute,
			}
			o.impls = defaultImpls(o)
			var out, log bytes.Buffer
			require.NoError(t, measure(t.Context(), o, &out, &log), "log:\n%s", log.String())
			for _, impl := range o.impls {
				line := lineOf(t, log.String(), resource+" n=30 workers=0 rep=1 "+impl+":")
				m := reqPerReconcile.FindStringSubmatch(line)
				require.NotNil(t, m, line)
				const writes = 1.0
				once, _ := strconv.ParseFloat(m[1], 64)
				// The writes of each reconcile, and the start's list and
				// watch requests (at most 5 with discovery) shared by the 30.
				assert.True(t, once >= writes && once <= writes+5.0/30, "requests per reconcile once: %s", line)
				// The writes of each steady reconcile; on a loaded machine
				// now and then a conflict's retry or a new watch (2 in the 20).
				steady, _ := strconv.ParseFloat(m[2], 64)
				assert.True(t, steady >= writes && steady <= writes+2.0/20, "requests per steady reconcile: %s", line)
				assert.Contains(t, line, "(20 samples, 0 missed)", "every steady write reconciled: %s", line)
			}
			assert.Contains(t, out.String(), "| sync + reconcile once |")
		})
	}
}

// One fail-over of each library with the short lease timing: the
// standby, a process of its own with a synced cache, reconciles only once
// the leader's SIGKILL has let the lease run out, and within the
// fail-over's bound. The lease runs from the last renewal the standby saw,
// up to a retry wait before the kill, and client-go sees renewals only
// when the second of renewTime changes (see leaseTimings).
func TestEachLibrarysStandbyShouldReconcileOnlyAfterTheLeadersSIGKILLLetTheLeaseRunOut(t *testing.T) {
	o := options{
		kubeconfig: testserver.Kubeconfig(t),
		resource:   resourceConfigMaps,
		failover:   []string{"short"},
		reps:       1,
		timeout:    2 * time.Minute,
	}
	o.impls = defaultImpls(o)
	var out, log bytes.Buffer
	require.NoError(t, measureFailover(t.Context(), o, &out, &log), "log:\n%s", log.String())
	tm := leaseTimings["short"]
	for _, impl := range o.impls {
		line := lineOf(t, log.String(), "fail-over lease 2s rep=1 "+impl+":")
		ms, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(line), " ms"), 64)
		require.NoError(t, err, line)
		took := time.Duration(ms * float64(time.Millisecond))
		earliest := tm.lease - time.Second - time.Duration(clientGoMaxWait*float64(tm.retry))
		assert.Greater(t, took, earliest, "%s: the standby led before the lease could have run out", impl)
		assert.Less(t, took, failoverTimeout(tm), impl)
	}
	assert.Contains(t, out.String(), "| 2s / 1.4s / 200ms (short) |")
}

var reqPerReconcile = regexp.MustCompile(`req/rec ([0-9.]+)/([0-9.]+)`)

func lineOf(t *testing.T, s, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(s, "\n") {
		if _, rest, ok := strings.Cut(line, prefix); ok {
			return rest
		}
	}
	t.Fatalf("no line with %q in:\n%s", prefix, s)
	return ""
}

func TestPercentileShouldTakeTheNearestRank(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	assert.Equal(t, 3.0, percentile(xs, 0.5))
	assert.Equal(t, 5.0, percentile(xs, 0.99))
	assert.Equal(t, 1.0, percentile(xs, 0))
	assert.Equal(t, 0.0, percentile(nil, 0.5))
}

func TestLabelShouldReadOneLabelOfAMetricLineOrNothing(t *testing.T) {
	assert.Equal(t, "PUT", label(`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="PUT",version="v1"} 12`, "verb"))
	assert.Equal(t, "", label(`x{a="b"} 1`, "verb"))
}
