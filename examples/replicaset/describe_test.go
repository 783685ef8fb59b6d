package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

// describeFixture is web (2 pods, one crash-looping) and other (1 pod),
// with events recorded through the program's recorders into the events
// store, 90 s after t0.
func describeFixture(t *testing.T) (*stores, time.Time) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rss, pods, evs := must.Do(memstore.New[string, ReplicaSet]()), must.Do(memstore.New[string, Pod]()), must.Do(memstore.New[string, events.Event]())
	st := &stores{replicaSets: rss, pods: pods, events: evs}
	cmd := []string{"replicaset", "worker"}
	web := ReplicaSet{Spec: ReplicaSetSpec{Replicas: 2, Command: cmd}, Status: ReplicaSetStatus{
		Replicas: 2, ReadyReplicas: 1, ObservedGeneration: 3, Conditions: []object.Condition{
			{Type: CondReady, Status: object.ConditionFalse, Reason: ReasonPodsNotReady, Message: "1/2 replicas ready; waiting for web-b (Waiting)"},
			{Type: CondReplicaFailure, Status: object.ConditionTrue, Reason: ReasonCrashLoopBackOff, Message: "web-b (Waiting)"},
		}}}
	web.Generation = 3
	web.AddFinalizer(finalizer)
	rss.Put("web", web)
	rss.Put("other", ReplicaSet{Spec: ReplicaSetSpec{Replicas: 1, Command: cmd}})
	pods.Put("web-a", Pod{Spec: PodSpec{Owner: "web", Node: "local", Command: cmd, CreatedAt: t0},
		Status: PodStatus{Phase: PhaseRunning, PID: 4242}})
	pods.Put("web-b", Pod{Spec: PodSpec{Owner: "web", Node: "local", Command: cmd, CreatedAt: t0.Add(10 * time.Second)},
		Status: PodStatus{Phase: PhaseWaiting, Reason: ReasonCrashLoopBackOff, RestartCount: 3}})
	pods.Put("other-a", Pod{Spec: PodSpec{Owner: "other", Node: "local", Command: cmd, CreatedAt: t0}})

	clk := clocktesting.NewFakeClock(t0)
	rec := must.Do(newEventRecorders(st.events))
	rs := must.Do(events.NewRecorder(rsEventSource, events.WithClock(clk), events.WithSink(rec.sinks[0])))
	agent := must.Do(events.NewRecorder(agentEventSource, events.WithClock(clk), events.WithSink(rec.sinks[1])))
	rs.Event(ctx, "web", events.Normal, EventSuccessfulCreate, "Created pod: web-a")
	clk.Step(10 * time.Second)
	rs.Event(ctx, "web", events.Normal, EventSuccessfulCreate, "Created pod: web-b")
	rs.Event(ctx, "other", events.Normal, EventSuccessfulCreate, "Created pod: other-a")
	for range 3 {
		clk.Step(20 * time.Second)
		agent.Event(ctx, "web-b", events.Warning, EventBackOff, "Back-off restarting failed process (exit status 3)")
	}
	agent.Event(ctx, "other-a", events.Warning, EventBackOff, "Back-off restarting failed process (exit status 1)")
	for _, s := range rec.sinks {
		require.NoError(t, s.Flush(ctx))
	}
	return st, t0.Add(90 * time.Second)
}

func TestDescribeShouldShowSpecStatusConditionsPodsAndTheEventsOfTheReplicaSetAndItsPods(t *testing.T) {
	st, now := describeFixture(t)
	var b bytes.Buffer
	require.NoError(t, describe(context.Background(), &b, st, "web", now))
	want := `Name:         web
Command:      replicaset worker
Replicas:     2 current / 2 desired
Pods Status:  1 Running / 1 Waiting / 0 Pending / 0 Failed
Generation:   3 (observed 3)
Finalizers:   replicaset.converge.dev/pods
Conditions:
  Type            Status  Reason            Message
  ----            ------  ------            -------
  Ready           False   PodsNotReady      1/2 replicas ready; waiting for web-b (Waiting)
  ReplicaFailure  True    CrashLoopBackOff  web-b (Waiting)
Pods:
  Name   Phase    Reason            Restarts  PID   Age
  ----   -----    ------            --------  ---   ---
  web-a  Running  <none>            0         4242  90s
  web-b  Waiting  CrashLoopBackOff  3         -     80s
Events:
  Type     Reason            Age                From                   Message
  ----     ------            ---                ----                   -------
  Normal   SuccessfulCreate  90s                replicaset-controller  Created pod: web-a
  Normal   SuccessfulCreate  80s                replicaset-controller  Created pod: web-b
  Warning  BackOff           20s (x3 over 60s)  node-agent             pod web-b: Back-off restarting failed process (exit status 3)
`
	assert.Equal(t, want, b.String())
}

func TestDescribeShouldSayNoneForAnEmptyTableAndNotFoundForAnUnknownName(t *testing.T) {
	st, now := describeFixture(t)
	st.events = must.Do(memstore.New[string, events.Event]()) // none recorded
	var b bytes.Buffer
	require.NoError(t, describe(context.Background(), &b, st, "other", now))
	assert.Contains(t, b.String(), "Conditions:\t<none>\n")
	assert.Contains(t, b.String(), "Events:\t<none>\n")
	assert.Contains(t, b.String(), "Finalizers:   <none>\n")

	err := describe(context.Background(), io.Discard, st, "nope", now)
	assert.ErrorIs(t, err, informer.ErrNotFound)
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 119 * time.Second: "119s", 200 * time.Second: "3m20s",
		12 * time.Minute: "12m", 5*time.Hour + 10*time.Minute: "5h10m", 72 * time.Hour: "3d",
	} {
		assert.Equal(t, want, age(d), "%v", d)
	}
}

// describe as a command reads the events another process recorded: with
// the memory store, through that process's API.
func TestTheDescribeCommandShouldPrintWhatTheAPIOfTheRunningProcessDescribes(t *testing.T) {
	st, _ := describeFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveAPI(ctx, ln, st) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-served) })

	resp, err := http.Get(fmt.Sprintf("http://%s/replicasets/web/describe", ln.Addr()))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))

	var stdout, stderr bytes.Buffer
	code := realMain([]string{"describe", "--addr", ln.Addr().String(), "web"}, &stdout, &stderr)
	require.Zero(t, code, stderr.String())
	assert.Contains(t, stdout.String(), "Name:         web\n")
	assert.Contains(t, stdout.String(), "pod web-b: Back-off restarting failed process (exit status 3)")

	stdout.Reset()
	code = realMain([]string{"describe", "--addr", ln.Addr().String(), "nope"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), ": 404 Not Found: no such replicaset")
	assert.Empty(t, stdout.String())
}

// failingCreates is a pod store whose creates fail, as a store that is
// down or over a quota would.
type failingCreates struct{ informer.Store[string, Pod] }

func (failingCreates) Create(context.Context, string, Pod) (informer.Revision, error) {
	return 0, errors.New("exceeded quota: pods, limit 0")
}

func TestTheReplicaSetControllerShouldRecordCreatesDeletesAndFailedCreatesAsEvents(t *testing.T) {
	f := newFixture(t)
	mem := must.Do(events.NewMemorySink(0))
	c := newRSController(f.rsInf, f.podInf, f.st, "local")
	c.now, c.events = f.h.Clock.Now, must.Do(events.NewRecorder(rsEventSource, events.WithSink(mem)))
	f.replicaSetControllerWith(c)
	f.apply(t, "web", 2)
	f.apply(t, "web", 1)
	byReason := map[string][]string{}
	for _, e := range mem.Events("web") {
		byReason[e.Reason] = append(byReason[e.Reason], e.Message)
	}
	assert.Len(t, byReason[EventSuccessfulCreate], 2)
	assert.Regexp(t, `^Created pod: web-\w{5}$`, byReason[EventSuccessfulCreate][0])
	assert.Len(t, byReason[EventSuccessfulDelete], 1)
	assert.Regexp(t, `^Deleted pod: web-\w{5}$`, byReason[EventSuccessfulDelete][0])

	c.pods = failingCreates{c.pods}
	f.apply(t, "web", 2)
	failed := mem.Events("web")[0]
	assert.Equal(t, EventFailedCreate, failed.Reason)
	assert.Equal(t, events.Warning, failed.Type)
	assert.Equal(t, "Error creating: exceeded quota: pods, limit 0", failed.Message)
}
