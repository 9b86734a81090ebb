package otel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/litequeue/litequeue"
	lqotel "github.com/litequeue/litequeue/metrics/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func ExampleTracing() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "q.db"), nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("app").Start(context.Background(), "POST /invoices")
	defer span.End()

	tr := lqotel.NewTracing(tp)
	q.Use(tr.Middleware())
	id, err := q.Enqueue(ctx, Traced{Name: "invoice"}, tr.Inject(ctx, nil))
	if err != nil {
		panic(err)
	}
	j, _ := q.Job(context.Background(), id)
	fmt.Println(tr.Extract(j.Trace).TraceID() == span.SpanContext().TraceID())
	// Output: true
}
