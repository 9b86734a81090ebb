package otel_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	lqotel "github.com/litequeue/litequeue/metrics/otel"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

type Traced struct{ Name string }

func (Traced) Kind() string { return "traced" }

// TestTraceContinuesFromEnqueueToHandler enqueues a job inside a request's
// span with Inject; its first attempt fails and its retry succeeds: the
// first attempt's span is a child of the request's span, the retry's a root
// linked to it, and the handler's own span a child of its attempt's.
func TestTraceContinuesFromEnqueueToHandler(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := lqotel.NewTracing(tp)
	mock := clock.NewMock()
	events := make(chan litequeue.Event, 64)
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{Clock: mock, PollInterval: -1,
		Queues:  []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(2, time.Minute)}},
		OnEvent: func(e litequeue.Event) { events <- e }})
	require.NoError(t, err)
	defer q.Close()
	q.Use(tr.Middleware())
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Traced]) error {
		_, span := tp.Tracer("app").Start(ctx, "handler work "+d.Job.Name)
		span.End()
		if d.Job.Name == "flaky" && d.Attempt == 1 {
			return errors.New("smtp timeout")
		}
		return nil
	})
	ctx := context.Background()
	reqCtx, req := tp.Tracer("app").Start(ctx, "POST /invoices")
	opts := tr.Inject(reqCtx, &litequeue.EnqueueOptions{Priority: 1})
	require.Equal(t, 1, opts.Priority, "Inject keeps the other options")
	require.NotEmpty(t, opts.Trace.TraceParent)
	id, err := q.Enqueue(ctx, Traced{Name: "flaky"}, opts)
	require.NoError(t, err)
	req.End()
	plain, err := q.Enqueue(ctx, Traced{Name: "plain"}, tr.Inject(ctx, nil))
	require.NoError(t, err, "a context without a span injects nothing")
	require.NoError(t, q.Start(ctx))
	var seen []litequeue.Event
	wait := func(typ litequeue.EventType, job int64) litequeue.Event {
		t.Helper()
		for i := 0; ; i++ {
			if i == len(seen) {
				select {
				case e := <-events:
					seen = append(seen, e)
				case <-time.After(10 * time.Second):
					t.Fatalf("no %s event for job %d", typ, job)
				}
			}
			if e := seen[i]; e.Type == typ && e.JobID == job {
				return e
			}
		}
	}
	wait(litequeue.EventSucceeded, plain)
	mock.Add(wait(litequeue.EventRetrying, id).Delay)
	wait(litequeue.EventSucceeded, id)
	require.NoError(t, q.Stop(ctx))

	reqSC := req.SpanContext()
	var attempts []tracetest.SpanStub
	var plainSpan *tracetest.SpanStub
	work := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "default process":
			if hasAttr(s, "messaging.message.id", litequeueID(plain)) {
				plainSpan = &s
			} else {
				attempts = append(attempts, s)
			}
		case "handler work flaky":
			work[s.Parent.SpanID()] = s
		}
	}
	require.Len(t, attempts, 2)
	first, retry := attempts[0], attempts[1]
	require.Equal(t, trace.SpanKindConsumer, first.SpanKind)
	require.Equal(t, reqSC.TraceID(), first.SpanContext.TraceID(), "the first attempt continues the request's trace")
	require.Equal(t, reqSC.SpanID(), first.Parent.SpanID())
	require.Len(t, first.Links, 1)
	require.Equal(t, reqSC.SpanID(), first.Links[0].SpanContext.SpanID())
	require.Equal(t, codes.Error, first.Status.Code)
	require.Equal(t, "smtp timeout", first.Status.Description)

	require.NotEqual(t, reqSC.TraceID(), retry.SpanContext.TraceID(), "a retry starts a trace of its own")
	require.False(t, retry.Parent.IsValid())
	require.Len(t, retry.Links, 1, "linked to the enqueue's span")
	require.Equal(t, reqSC.TraceID(), retry.Links[0].SpanContext.TraceID())
	require.Equal(t, reqSC.SpanID(), retry.Links[0].SpanContext.SpanID())
	require.True(t, hasAttr(retry, "litequeue.attempt", "2"))
	require.Equal(t, codes.Unset, retry.Status.Code)

	for _, a := range attempts {
		_, ok := work[a.SpanContext.SpanID()]
		require.True(t, ok, "the handler's span is a child of its attempt's")
	}
	require.NotNil(t, plainSpan)
	require.False(t, plainSpan.Parent.IsValid())
	require.Empty(t, plainSpan.Links, "no trace context: a root span without links")
}

func TestExtractRefusesGarbage(t *testing.T) {
	tr := lqotel.NewTracing(sdktrace.NewTracerProvider())
	require.False(t, tr.Extract(litequeue.TraceContext{}).IsValid())
	require.False(t, tr.Extract(litequeue.TraceContext{TraceParent: "not a traceparent"}).IsValid())
	sc := tr.Extract(litequeue.TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "vendor=x"})
	require.True(t, sc.IsValid())
	require.True(t, sc.IsRemote())
	require.Equal(t, "vendor=x", sc.TraceState().String())
}

func litequeueID(id int64) string { return strconv.FormatInt(id, 10) }

func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, a := range s.Attributes {
		if string(a.Key) == key && a.Value.String() == value {
			return true
		}
	}
	return false
}
