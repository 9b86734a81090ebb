package otel

import (
	"context"
	"fmt"

	"github.com/litequeue/litequeue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing carries a trace from Enqueue to the handler: Inject stores the
// W3C trace context of the enqueuing context's span with the job
// (EnqueueOptions.Trace), and Middleware starts a span for each attempt
// that continues it. The queue itself stores the two header values only;
// this package reads and writes them with OpenTelemetry's W3C TraceContext
// propagator.
//
//	tr := otel.NewTracing(tracerProvider)
//	q.Use(tr.Middleware())
//	q.Enqueue(ctx, job, tr.Inject(ctx, nil))
//
// The span of an attempt is a consumer span named "<queue> process" with
// the job's queue, kind, id and attempt as attributes; its context is the
// handler's, so that the handler's own spans, and the jobs it enqueues
// with Inject, belong to it. The first attempt's span is a child of the
// enqueue's span (one trace from the request to the job's first run) and
// links to it; a retry's span starts a trace of its own with a link to the
// enqueue's span (a span link per retry), so that a trace does not stretch
// over the hours a backoff may last. A job enqueued without a trace
// context gets a root span per attempt. A handler's error ends the span
// with status Error.
type Tracing struct {
	tracer trace.Tracer
	prop   propagation.TraceContext
}

// NewTracing makes a Tracing whose spans come from a tracer of tp.
func NewTracing(tp trace.TracerProvider) *Tracing {
	return &Tracing{tracer: tp.Tracer(ScopeName)}
}

// Inject returns opts with Trace set to the W3C trace context of ctx's span:
// a copy of opts (a new EnqueueOptions for nil), which is left unchanged.
// Without a valid span in ctx the Trace of the copy is left as opts had it.
func (t *Tracing) Inject(ctx context.Context, opts *litequeue.EnqueueOptions) *litequeue.EnqueueOptions {
	var o litequeue.EnqueueOptions
	if opts != nil {
		o = *opts
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return &o
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	o.Trace = litequeue.TraceContext{TraceParent: c.Get("traceparent"), TraceState: c.Get("tracestate")}
	return &o
}

// Extract returns the span context stored as tc, invalid when tc holds
// none (or one that does not parse).
func (t *Tracing) Extract(tc litequeue.TraceContext) trace.SpanContext {
	if tc.TraceParent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{"traceparent": tc.TraceParent}
	if tc.TraceState != "" {
		c["tracestate"] = tc.TraceState
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), c))
}

// Middleware returns the litequeue.Middleware that runs each attempt in a
// span continuing the job's trace context (see Tracing).
func (t *Tracing) Middleware() litequeue.Middleware {
	return func(next litequeue.HandlerFunc) litequeue.HandlerFunc {
		return func(ctx context.Context, a litequeue.AttemptInfo) error {
			opts := []trace.SpanStartOption{
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					attribute.String("messaging.system", "litequeue"),
					attribute.String("messaging.operation.type", "process"),
					attribute.String("messaging.destination.name", a.Queue),
					attribute.String("messaging.message.id", fmt.Sprint(a.ID)),
					attribute.String("litequeue.kind", a.Kind),
					attribute.Int("litequeue.attempt", a.Attempt),
				),
			}
			parent := ctx
			if sc := t.Extract(a.Trace); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
					Attributes: []attribute.KeyValue{attribute.Int("litequeue.attempt", a.Attempt)}}))
				if a.Attempt <= 1 {
					parent = trace.ContextWithRemoteSpanContext(ctx, sc)
				} else {
					opts = append(opts, trace.WithNewRoot())
				}
			}
			ctx, span := t.tracer.Start(parent, a.Queue+" process", opts...)
			defer span.End()
			err := next(ctx, a)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			return err
		}
	}
}
