package reconcile

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the controllers' spans.
const tracerName = "github.com/converge-go/converge/reconcile"

// WithTracerProvider makes every reconcile an OpenTelemetry span named
// "reconcile <controller>", with the controller, key and reconcile ID as
// attributes, its error recorded, and its context the reconcile's, so spans
// the reconciler starts are its children. Pass otel.GetTracerProvider() to
// use the global provider. Default: no spans, and no cost.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *settings) error {
		if tp == nil {
			return fmt.Errorf("WithTracerProvider(nil)")
		}
		s.tracer = tp.Tracer(tracerName)
		return nil
	}
}

// startSpan starts a reconcile's span, or returns a nil span without a
// tracer.
func (r *run[K]) startSpan(ctx context.Context, info *reconcileInfo[K]) (context.Context, trace.Span) {
	t := r.c.s.tracer
	if t == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("controller", r.c.name),
		attribute.String("key", fmt.Sprint(info.key)),
		attribute.String("reconcile.id", info.reconcileID()),
	}
	if ts := info.triggers(); len(ts) > 0 {
		texts := make([]string, len(ts))
		for i, t := range ts {
			texts[i] = t.String()
		}
		attrs = append(attrs, attribute.StringSlice("converge.triggers", texts))
		if info.why != nil && info.why.dropped > 0 {
			attrs = append(attrs, attribute.Int("converge.triggers.dropped", int(info.why.dropped)))
		}
	}
	return t.Start(ctx, "reconcile "+r.c.name, trace.WithAttributes(attrs...))
}

// endSpan records a reconcile's outcome on its span and ends it.
func endSpan(span trace.Span, label string, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("result", label))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
