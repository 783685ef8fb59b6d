package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// spans is a TracerProvider that records the spans started with it.
type spans struct {
	tracenoop.TracerProvider
	mu    sync.Mutex
	ended []*span
}

type tracer struct {
	tracenoop.Tracer
	p *spans
}

type span struct {
	tracenoop.Span
	p      *spans
	name   string
	attrs  map[string]string
	errs   []error
	status codes.Code
}

func (p *spans) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{p: p} }

func (t tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &span{p: t.p, name: name, attrs: map[string]string{}}
	cfg := trace.NewSpanStartConfig(opts...)
	s.SetAttributes(cfg.Attributes()...)
	return trace.ContextWithSpan(ctx, s), s
}

func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	for _, a := range kv {
		s.attrs[string(a.Key)] = a.Value.String()
	}
}
func (s *span) RecordError(err error, _ ...trace.EventOption) { s.errs = append(s.errs, err) }
func (s *span) SetStatus(c codes.Code, _ string)              { s.status = c }
func (s *span) End(...trace.SpanEndOption) {
	s.p.mu.Lock()
	s.p.ended = append(s.p.ended, s)
	s.p.mu.Unlock()
}

func TestEveryReconcileIsASpanWithItsOutcome(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("good", 1)
	store.Put("bad", 1)
	var inside []trace.Span
	var mu sync.Mutex
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		mu.Lock()
		inside = append(inside, trace.SpanFromContext(ctx))
		mu.Unlock()
		if key == "bad" {
			return reconcile.Result{}, reconcile.Terminal(errors.New("no"))
		}
		return reconcile.Result{}, nil
	})
	tp := &spans{}
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "things", rec, reconcile.For(inf), reconcile.WithTracerProvider(tp), quiet)
	h.Settle()

	tp.mu.Lock()
	defer tp.mu.Unlock()
	require.Len(t, tp.ended, 2)
	byKey := map[string]*span{}
	for _, s := range tp.ended {
		assert.Equal(t, "reconcile things", s.name)
		assert.Equal(t, "things", s.attrs["controller"])
		assert.NotEmpty(t, s.attrs["reconcile.id"])
		byKey[s.attrs["key"]] = s
	}
	assert.Equal(t, "success", byKey["good"].attrs["result"])
	assert.Equal(t, codes.Unset, byKey["good"].status)
	assert.Equal(t, "error", byKey["bad"].attrs["result"])
	assert.Equal(t, codes.Error, byKey["bad"].status)
	assert.Len(t, byKey["bad"].errs, 1)
	for _, s := range inside {
		assert.Contains(t, tp.ended, s, "the reconcile's context carries its span")
	}
}
