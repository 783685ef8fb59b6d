package main

import (
	"context"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
)

// Event reasons, as Kubernetes' ReplicaSet controller and kubelet record
// them.
const (
	EventSuccessfulCreate = "SuccessfulCreate" // Normal, on the ReplicaSet: "Created pod: web-x7k2p"
	EventFailedCreate     = "FailedCreate"     // Warning, on the ReplicaSet: the create's error
	EventSuccessfulDelete = "SuccessfulDelete" // Normal, on the ReplicaSet: "Deleted pod: web-x7k2p"
	EventFailedDelete     = "FailedDelete"     // Warning, on the ReplicaSet: the delete's error
	EventBackOff          = "BackOff"          // Warning, on the pod: its process keeps exiting
)

// The components that record events (an event's Source, describe's From).
const (
	rsEventSource    = "replicaset-controller"
	agentEventSource = "node-agent"
)

// The store keys of events: <prefix><object's name>/<event ID>, a prefix
// per kind of object, so that describe finds a ReplicaSet's events and
// its pods' by prefix.
const (
	rsEventPrefix  = "replicasets/"
	podEventPrefix = "pods/"
)

// eventRecorders are the two controllers' recorders, and the sinks that
// write their events to the events store, where describe reads them from
// any process.
type eventRecorders struct {
	rs, agent       *events.Recorder
	rsSink, podSink *events.StoreSink
	sinks           []*events.StoreSink
}

func newEventRecorders(st informer.Store[string, events.Event]) (*eventRecorders, error) {
	rsSink, err := events.NewStoreSink(st, events.WithPrefix(rsEventPrefix))
	if err != nil {
		return nil, err
	}
	podSink, err := events.NewStoreSink(st, events.WithPrefix(podEventPrefix))
	if err != nil {
		return nil, err
	}
	rs, err := events.NewRecorder(rsEventSource, events.WithSink(rsSink))
	if err != nil {
		return nil, err
	}
	agent, err := events.NewRecorder(agentEventSource, events.WithSink(podSink))
	if err != nil {
		return nil, err
	}
	return &eventRecorders{
		rs: rs, agent: agent,
		rsSink: rsSink, podSink: podSink,
		sinks: []*events.StoreSink{rsSink, podSink},
	}, nil
}

// run writes the events until ctx is done, then what is still pending,
// for up to a second: the last events of a shutdown are worth keeping.
func (r *eventRecorders) run(ctx context.Context) error {
	done := make(chan struct{}, len(r.sinks))
	for _, s := range r.sinks {
		go func() {
			_ = s.Run(ctx)
			done <- struct{}{}
		}()
	}
	for range r.sinks {
		<-done
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	for _, s := range r.sinks {
		_ = s.Flush(fctx)
	}
	return nil
}
