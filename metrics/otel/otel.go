// Package otel records a litequeue queue's figures as OpenTelemetry metrics:
// job events by queue, kind and type, handler durations (both fed by the
// queue's OnEvent hook), and, once ObserveQueue is given the queue, read at
// each collection: per-queue job counts by state, the age of the oldest
// ready job, whether each queue is paused, how many events the queue
// dropped, and each schedule's next and last run, pause and missed
// occurrences.
//
// Progress reports (litequeue.EventProgress) are not counted: a handler may
// report thousands per job, which would drown the other events; follow
// progress with Queue.WatchProgress or the dashboard.
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
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

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
	var counted []string
	for _, t := range litequeue.EventTypes() {
		if t != litequeue.EventProgress {
			counted = append(counted, string(t))
		}
	}
	if r.events, err = r.meter.Int64Counter(r.prefix+"events",
		metric.WithDescription("Job events seen by this process, by queue, kind and event ("+strings.Join(counted, ", ")+
			"); kind is empty for the queue-level events paused, resumed and config_warning. Progress reports are not counted."),
		metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	if r.duration, err = r.meter.Float64Histogram(r.prefix+"handler.duration",
		metric.WithDescription("How long handlers ran, by queue, kind and outcome (succeeded, retrying, dead)."), metric.WithUnit("s")); err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	return r, nil
}

// Record measures one event (but progress reports); pass it as litequeue.Options.OnEvent (or call
// it from your own hook). It does not block.
func (r *Recorder) Record(e litequeue.Event) {
	if e.Type == litequeue.EventProgress {
		return // see the package documentation
	}
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

// ObserveQueue registers instruments read from q at each collection: the
// jobs of each queue by state (counts stop at 100,000 per queue), the age of
// its oldest ready job, whether it is paused (a paused queue without jobs
// too), the events q dropped (Queue.DroppedEvents), and for each schedule
// its next run (absent while paused) and last run as Unix seconds, whether
// it is paused and how many occurrences it missed. The registration lasts
// as long as the meter provider; unregister it with the returned
// Registration.
func (r *Recorder) ObserveQueue(q *litequeue.Queue) (metric.Registration, error) {
	var errs []error
	gauge := func(name, desc, unit string) metric.Float64ObservableGauge {
		g, err := r.meter.Float64ObservableGauge(r.prefix+name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return g
	}
	counter := func(name, desc, unit string) metric.Int64ObservableCounter {
		c, err := r.meter.Int64ObservableCounter(r.prefix+name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	jobs, err := r.meter.Int64ObservableGauge(r.prefix+"jobs",
		metric.WithDescription("Jobs in the queue file by queue and state (ready, scheduled, running, completed, dead, cancelled)."), metric.WithUnit("{job}"))
	errs = append(errs, err)
	oldest := gauge("oldest_ready.age", "How long the longest-waiting ready job of the queue has been due; 0 when none is ready.", "s")
	paused := gauge("queue.paused", "1 while the queue is paused in every process, 0 otherwise.", "1")
	dropped := counter("events.dropped", "Events the queue did not hand to its OnEvent hook because Options.EventBuffer events already waited.", "{event}")
	nextRun := gauge("schedule.next_run", "When the schedule enqueues its next occurrence, in Unix seconds; absent while it is paused.", "s")
	lastRun := gauge("schedule.last_run", "The occurrence of the schedule's last enqueued job, in Unix seconds; absent before the first.", "s")
	schedPaused := gauge("schedule.paused", "1 while the schedule is paused, 0 otherwise.", "1")
	missed := counter("schedule.missed", "Occurrences of the schedule skipped because no process ran it at their time.", "{occurrence}")
	limitGauges := map[string]metric.Float64ObservableGauge{}
	for _, g := range limitValues {
		limitGauges[g.name] = gauge("queue.limit."+g.name, g.desc, g.unit)
	}
	held := gauge("queue.held_jobs", "Ready jobs of the queue that a queue-wide flow-control limit holds now, by reason (concurrency, rate); jobs held by a group's limit are not counted.", "{job}")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	reg, err := r.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveInt64(dropped, int64(min(q.DroppedEvents(), math.MaxInt64)))
		sums, err := q.QueueSummaries(ctx, 0)
		if err != nil {
			return err
		}
		cancelled, _, err := q.FinishedCounts(ctx, litequeue.StateCancelled, 0)
		if err != nil {
			return err
		}
		pausedQueues, err := q.PausedQueues(ctx)
		if err != nil {
			return err
		}
		schedules, err := q.Schedules(ctx)
		if err != nil {
			return err
		}
		limits, err := q.Limits(ctx)
		if err != nil {
			return err
		}
		for name, l := range limits {
			attrs := metric.WithAttributes(attribute.String("queue", name))
			for _, g := range limitValues {
				o.ObserveFloat64(limitGauges[g.name], g.value(l), attrs)
			}
			var holds litequeue.WaitKind
			if l.Concurrency > 0 || l.Rate.N > 0 {
				u, err := q.LimitsUsage(ctx, name)
				if err != nil {
					return err
				}
				holds = u.Holds(l)
			}
			ready := 0
			for _, s := range sums {
				if s.Queue == name {
					ready = s.Ready
				}
			}
			for _, reason := range []litequeue.WaitKind{litequeue.WaitConcurrency, litequeue.WaitRate} {
				n := 0
				if holds == reason {
					n = ready
				}
				o.ObserveFloat64(held, float64(n), metric.WithAttributes(attribute.String("queue", name), attribute.String("reason", string(reason))))
			}
		}
		for _, s := range sums {
			for state, n := range map[litequeue.State]int{litequeue.StateReady: s.Ready, litequeue.StateScheduled: s.Scheduled,
				litequeue.StateRunning: s.Running, litequeue.StateCompleted: s.Completed, litequeue.StateDead: s.Dead,
				litequeue.StateCancelled: cancelled[s.Queue]} {
				o.ObserveInt64(jobs, int64(n), metric.WithAttributes(attribute.String("queue", s.Queue), attribute.String("state", string(state))))
			}
			delete(cancelled, s.Queue)
			o.ObserveFloat64(oldest, s.OldestReady.Seconds(), metric.WithAttributes(attribute.String("queue", s.Queue)))
			if _, ok := pausedQueues[s.Queue]; !ok {
				o.ObserveFloat64(paused, 0, metric.WithAttributes(attribute.String("queue", s.Queue)))
			}
		}
		for name, n := range cancelled { // queues with only cancelled jobs
			o.ObserveInt64(jobs, int64(n), metric.WithAttributes(attribute.String("queue", name), attribute.String("state", string(litequeue.StateCancelled))))
		}
		for name := range pausedQueues {
			o.ObserveFloat64(paused, 1, metric.WithAttributes(attribute.String("queue", name)))
		}
		for _, s := range schedules {
			attrs := metric.WithAttributes(attribute.String("schedule", s.Name), attribute.String("queue", s.Queue), attribute.String("kind", s.Kind))
			if !s.Paused && !s.NextRun.IsZero() {
				o.ObserveFloat64(nextRun, unixSeconds(s.NextRun), attrs)
			}
			if !s.LastRun.IsZero() {
				o.ObserveFloat64(lastRun, unixSeconds(s.LastRun), attrs)
			}
			p := 0.0
			if s.Paused {
				p = 1
			}
			o.ObserveFloat64(schedPaused, p, attrs)
			o.ObserveInt64(missed, s.MissedCount, attrs)
		}
		return nil
	}, append([]metric.Observable{jobs, oldest, paused, dropped, nextRun, lastRun, schedPaused, missed, held}, observables(limitGauges)...)...)
	if err != nil {
		return nil, fmt.Errorf("litequeue/metrics/otel: %w", err)
	}
	return reg, nil
}

// unixSeconds is t in Unix seconds, with its fraction.
func unixSeconds(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

// limitValues are the gauges of a queue's configured limits; 0 is no
// limit.
var limitValues = []struct {
	name, desc, unit string
	value            func(litequeue.QueueLimits) float64
}{
	{"concurrency", "The most jobs of the queue running at once across every process (QueueLimits.Concurrency); 0 for no limit.", "{job}",
		func(l litequeue.QueueLimits) float64 { return float64(l.Concurrency) }},
	{"key_concurrency", "The most jobs of one group running at once (QueueLimits.KeyConcurrency); 0 for no limit.", "{job}",
		func(l litequeue.QueueLimits) float64 { return float64(l.KeyConcurrency) }},
	{"ordered", "1 when each group's jobs run one at a time in enqueue order (QueueLimits.Ordered), 0 otherwise.", "1",
		func(l litequeue.QueueLimits) float64 {
			if l.Ordered {
				return 1
			}
			return 0
		}},
	{"rate.starts", "The most starts of the queue's jobs per rate period (QueueLimits.Rate.N); 0 for no limit.", "{start}",
		func(l litequeue.QueueLimits) float64 { return float64(l.Rate.N) }},
	{"rate.period", "The window of QueueLimits.Rate; 0 for no limit.", "s",
		func(l litequeue.QueueLimits) float64 { return l.Rate.Per.Seconds() }},
	{"key_rate.starts", "The most starts of one group's jobs per key rate period (QueueLimits.KeyRate.N); 0 for no limit.", "{start}",
		func(l litequeue.QueueLimits) float64 { return float64(l.KeyRate.N) }},
	{"key_rate.period", "The window of QueueLimits.KeyRate; 0 for no limit.", "s",
		func(l litequeue.QueueLimits) float64 { return l.KeyRate.Per.Seconds() }},
}

// observables lists gs in the order of limitValues.
func observables(gs map[string]metric.Float64ObservableGauge) []metric.Observable {
	out := make([]metric.Observable, 0, len(gs))
	for _, g := range limitValues {
		out = append(out, gs[g.name])
	}
	return out
}
