// Package otel records a litequeue queue's figures as OpenTelemetry metrics:
// job events by queue, kind and type, handler durations (both fed by the
// queue's OnEvent hook), and, once Observe is given the queue, per-queue job
// counts by state and the age of the oldest ready job, read at each
// collection.
//
//	rec, err := otel.New(meterProvider, nil)
//	q, err := litequeue.Open("app-queue.db", &litequeue.Options{OnEvent: rec.Record})
//	reg, err := rec.ObserveQueue(q)
//
// It lives in its own package so that programs importing only litequeue do
// not link OpenTelemetry.
package otel

import (
	"context"
	"fmt"

	"github.com/litequeue/litequeue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/litequeue/litequeue/metrics/otel"

// Options configures a Recorder. A nil *Options, and every zero field, means
// the documented default.
type Options struct {
	// Prefix starts every instrument name. Default "litequeue.".
	Prefix string
}

// Recorder turns a queue's events into OpenTelemetry measurements. It is
// safe for concurrent use.
type Recorder struct {
	prefix   string
	meter    metric.Meter
	events   metric.Int64Counter
	duration metric.Float64Histogram
}

// New makes the instruments on a meter of mp; a nil opts means defaults.
func New(mp metric.MeterProvider, opts *Options) (*Recorder, error) {
	r := &Recorder{prefix: "litequeue."}
	if opts != nil && opts.Prefix != "" {
		r.prefix = opts.Prefix
	}
	r.meter = mp.Meter(ScopeName)
	var err error
	if r.events, err = r.meter.Int64Counter(r.prefix+"events",
		metric.WithDescription("Job events seen by this process, by queue, kind and event."), metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	if r.duration, err = r.meter.Float64Histogram(r.prefix+"handler.duration",
		metric.WithDescription("How long handlers ran, by queue, kind and outcome (succeeded, retrying, dead)."), metric.WithUnit("s")); err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	return r, nil
}

// Record measures one event; pass it as litequeue.Options.OnEvent (or call
// it from your own hook). It does not block.
func (r *Recorder) Record(e litequeue.Event) {
	ctx := context.Background()
	r.events.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", e.Queue), attribute.String("kind", e.Kind), attribute.String("event", string(e.Type))))
	switch e.Type {
	case litequeue.EventSucceeded, litequeue.EventRetrying, litequeue.EventDead:
		if e.Duration > 0 || e.Type == litequeue.EventSucceeded {
			r.duration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(attribute.String("queue", e.Queue),
				attribute.String("kind", e.Kind), attribute.String("outcome", string(e.Type))))
		}
	}
}

// ObserveQueue registers gauges read from q's file at each collection: the
// jobs of each queue by state (counts stop at 100,000 per queue) and the age
// of its oldest ready job. The registration lasts as long as the meter
// provider; unregister it with the returned Registration.
func (r *Recorder) ObserveQueue(q *litequeue.Queue) (metric.Registration, error) {
	jobs, err := r.meter.Int64ObservableGauge(r.prefix+"jobs",
		metric.WithDescription("Jobs in the queue file by queue and state."), metric.WithUnit("{job}"))
	if err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	oldest, err := r.meter.Float64ObservableGauge(r.prefix+"oldest_ready.age",
		metric.WithDescription("How long the longest-waiting ready job of the queue has been due; 0 when none is ready."), metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	reg, err := r.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		sums, err := q.QueueSummaries(ctx, 0)
		if err != nil {
			return err
		}
		for _, s := range sums {
			for state, n := range map[litequeue.State]int{litequeue.StateReady: s.Ready, litequeue.StateScheduled: s.Scheduled,
				litequeue.StateRunning: s.Running, litequeue.StateCompleted: s.Completed, litequeue.StateDead: s.Dead} {
				o.ObserveInt64(jobs, int64(n), metric.WithAttributes(attribute.String("queue", s.Queue), attribute.String("state", string(state))))
			}
			o.ObserveFloat64(oldest, s.OldestReady.Seconds(), metric.WithAttributes(attribute.String("queue", s.Queue)))
		}
		return nil
	}, jobs, oldest)
	if err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	return reg, nil
}
