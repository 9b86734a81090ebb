// Package prometheus exports a litequeue queue's figures to Prometheus:
// per-queue job counts by state, the age of the oldest ready job, whether
// each queue is paused, each schedule's next and last run, pause and missed
// occurrences, and how many events the queue dropped (read from the queue at
// each scrape); job events by queue, kind and type, and a histogram of
// handler durations (fed by the queue's OnEvent hook).
//
// Progress reports (litequeue.EventProgress) are not counted: a handler may
// report thousands per job, which would drown the other events; follow
// progress with Queue.WatchProgress or the dashboard.
//
//	c := prometheus.NewCollector(nil)
//	q, err := litequeue.Open("app-queue.db", &litequeue.Options{OnEvent: c.Observe})
//	c.SetQueue(q)
//	registry.MustRegister(c) // or serve c.Handler() at /metrics
//
// It lives in its own package so that programs importing only litequeue do
// not link the Prometheus client.
package prometheus

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configures a Collector. A nil *Options, and every zero field,
// means the documented default.
type Options struct {
	// Namespace prefixes every metric name. Default "litequeue".
	Namespace string
	// Buckets are the handler duration histogram's upper bounds, in
	// seconds. Default DefaultBuckets.
	Buckets []float64
	// ScrapeTimeout bounds the read of the queue file at each scrape.
	// Default 5s.
	ScrapeTimeout time.Duration
}

// DefaultBuckets spans 1ms to about 2 minutes.
var DefaultBuckets = prometheus.ExponentialBuckets(0.001, 4, 10)

// Collector is a prometheus.Collector of one queue. Its Observe method is
// meant for litequeue.Options.OnEvent; SetQueue gives it the queue whose
// file it reads at each scrape. It is safe for concurrent use.
type Collector struct {
	opts     Options
	events   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	jobs     *prometheus.Desc
	oldest   *prometheus.Desc
	paused   *prometheus.Desc
	dropped  *prometheus.Desc
	schedule struct {
		nextRun, lastRun, paused, missed *prometheus.Desc
	}
	up *prometheus.Desc
	// limit: the configured flow-control limits (litequeue.QueueLimits)
	// by name; held the ready jobs a queue-wide limit holds.
	limit map[string]*prometheus.Desc
	held  *prometheus.Desc

	mu sync.Mutex
	q  *litequeue.Queue
}

// NewCollector returns a collector with no queue yet; a nil opts means
// defaults.
func NewCollector(opts *Options) *Collector {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = "litequeue"
	}
	if len(o.Buckets) == 0 {
		o.Buckets = DefaultBuckets
	}
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 5 * time.Second
	}
	ns := o.Namespace
	c := &Collector{
		opts: o,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_total",
			Help: "Job events seen by this process, by queue, kind and event (" + strings.Join(CountedEvents(), ", ") +
				"); kind is empty for the queue-level events paused, resumed and config_warning. Progress reports are not counted."},
			[]string{"queue", "kind", "event"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "handler_duration_seconds",
			Help: "How long handlers ran, by queue, kind and outcome (succeeded, retrying, dead).", Buckets: o.Buckets},
			[]string{"queue", "kind", "outcome"}),
		jobs: prometheus.NewDesc(ns+"_jobs", "Jobs in the queue file by queue and state (ready, scheduled, running, completed, dead, cancelled); counts stop at 100,000 per queue.",
			[]string{"queue", "state"}, nil),
		oldest: prometheus.NewDesc(ns+"_oldest_ready_seconds", "How long the longest-waiting ready job of the queue has been due; 0 when none is ready.",
			[]string{"queue"}, nil),
		paused: prometheus.NewDesc(ns+"_queue_paused", "1 while the queue is paused (Queue.Pause, lqinspect pause) in every process, 0 otherwise.",
			[]string{"queue"}, nil),
		dropped: prometheus.NewDesc(ns+"_events_dropped_total", "Events this process's queue did not hand to its OnEvent hook because Options.EventBuffer events already waited: they are missing from "+ns+"_events_total.",
			nil, nil),
		up: prometheus.NewDesc(ns+"_scrape_ok", "1 when the last read of the queue for this scrape succeeded, 0 when it failed.", nil, nil),
	}
	sl := []string{"schedule", "queue", "kind"}
	c.limit = map[string]*prometheus.Desc{}
	for _, l := range limitGauges {
		c.limit[l.name] = prometheus.NewDesc(ns+"_queue_limit_"+l.name, l.help, []string{"queue"}, nil)
	}
	c.held = prometheus.NewDesc(ns+"_queue_held_jobs", "Ready jobs of the queue that a queue-wide flow-control limit holds now, by reason: concurrency (QueueLimits.Concurrency jobs run) or rate (QueueLimits.Rate is used up). Jobs held by a group's limit are not counted.",
		[]string{"queue", "reason"}, nil)
	c.schedule.nextRun = prometheus.NewDesc(ns+"_schedule_next_run_timestamp_seconds", "When the schedule enqueues its next occurrence, in Unix seconds; absent while it is paused.", sl, nil)
	c.schedule.lastRun = prometheus.NewDesc(ns+"_schedule_last_run_timestamp_seconds", "The occurrence of the schedule's last enqueued job, in Unix seconds; absent before the first.", sl, nil)
	c.schedule.paused = prometheus.NewDesc(ns+"_schedule_paused", "1 while the schedule is paused, 0 otherwise.", sl, nil)
	c.schedule.missed = prometheus.NewDesc(ns+"_schedule_missed_total", "Occurrences of the schedule skipped because no process ran it at their time (its missed policy).", sl, nil)
	return c
}

// CountedEvents returns the event types the events counter counts: every
// litequeue.EventTypes but progress, in that order.
func CountedEvents() []string {
	var out []string
	for _, t := range litequeue.EventTypes() {
		if t != litequeue.EventProgress {
			out = append(out, string(t))
		}
	}
	return out
}

// SetQueue sets the queue whose file each scrape reads; nil stops the
// reads (the event metrics remain).
func (c *Collector) SetQueue(q *litequeue.Queue) {
	c.mu.Lock()
	c.q = q
	c.mu.Unlock()
}

// Observe counts one event (but progress reports) and, for the end of an
// attempt, its duration.
// Pass it as litequeue.Options.OnEvent (or call it from your own hook). It
// does not block.
func (c *Collector) Observe(e litequeue.Event) {
	if e.Type == litequeue.EventProgress {
		return // see the package documentation
	}
	c.events.WithLabelValues(e.Queue, e.Kind, string(e.Type)).Inc()
	switch e.Type {
	case litequeue.EventSucceeded, litequeue.EventRetrying, litequeue.EventDead:
		if e.Duration > 0 || e.Type == litequeue.EventSucceeded {
			c.duration.WithLabelValues(e.Queue, e.Kind, string(e.Type)).Observe(e.Duration.Seconds())
		}
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.events.Describe(ch)
	c.duration.Describe(ch)
	ch <- c.jobs
	ch <- c.oldest
	ch <- c.paused
	ch <- c.dropped
	ch <- c.schedule.nextRun
	ch <- c.schedule.lastRun
	ch <- c.schedule.paused
	ch <- c.schedule.missed
	ch <- c.up
	for _, d := range c.limit {
		ch <- d
	}
	ch <- c.held
}

// Collect implements prometheus.Collector: the event metrics, then the
// queue's counts, pauses and schedules read now. When a read fails the
// queue's figures are left out and scrape_ok is 0.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.events.Collect(ch)
	c.duration.Collect(ch)
	c.mu.Lock()
	q := c.q
	c.mu.Unlock()
	if q == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(q.DroppedEvents()))
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ScrapeTimeout)
	defer cancel()
	sums, err := q.QueueSummaries(ctx, 0)
	var cancelled map[string]int
	if err == nil {
		cancelled, _, err = q.FinishedCounts(ctx, litequeue.StateCancelled, 0)
	}
	var paused map[string]time.Time
	if err == nil {
		paused, err = q.PausedQueues(ctx)
	}
	var schedules []litequeue.ScheduleInfo
	if err == nil {
		schedules, err = q.Schedules(ctx)
	}
	var limits map[string]litequeue.QueueLimits
	if err == nil {
		limits, err = q.Limits(ctx)
	}
	usage := map[string]litequeue.LimitsUsage{}
	for name, l := range limits {
		if err == nil && (l.Concurrency > 0 || l.Rate.N > 0) {
			usage[name], err = q.LimitsUsage(ctx, name)
		}
	}
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for name, n := range cancelled { // queues with only cancelled jobs (QueueSummaries lists none)
		if !slices.ContainsFunc(sums, func(s litequeue.QueueSummary) bool { return s.Queue == name }) {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), name, string(litequeue.StateCancelled))
		}
	}
	for _, s := range sums {
		for state, n := range map[litequeue.State]int{litequeue.StateReady: s.Ready, litequeue.StateScheduled: s.Scheduled,
			litequeue.StateRunning: s.Running, litequeue.StateCompleted: s.Completed, litequeue.StateDead: s.Dead,
			litequeue.StateCancelled: cancelled[s.Queue]} {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), s.Queue, string(state))
		}
		delete(cancelled, s.Queue)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestReady.Seconds(), s.Queue)
		if _, ok := paused[s.Queue]; !ok {
			ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, 0, s.Queue)
		}
	}
	for name := range paused { // with jobs or not
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, 1, name)
	}
	for name, l := range limits {
		for _, g := range limitGauges {
			ch <- prometheus.MustNewConstMetric(c.limit[g.name], prometheus.GaugeValue, g.value(l), name)
		}
		ready := 0
		for _, s := range sums {
			if s.Queue == name {
				ready = s.Ready
			}
		}
		holds := usage[name].Holds(l)
		for _, reason := range []litequeue.WaitKind{litequeue.WaitConcurrency, litequeue.WaitRate} {
			n := 0
			if holds == reason {
				n = ready
			}
			ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(n), name, string(reason))
		}
	}
	for _, s := range schedules {
		labels := []string{s.Name, s.Queue, s.Kind}
		if !s.Paused && !s.NextRun.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.schedule.nextRun, prometheus.GaugeValue, unixSeconds(s.NextRun), labels...)
		}
		if !s.LastRun.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.schedule.lastRun, prometheus.GaugeValue, unixSeconds(s.LastRun), labels...)
		}
		ch <- prometheus.MustNewConstMetric(c.schedule.paused, prometheus.GaugeValue, boolValue(s.Paused), labels...)
		ch <- prometheus.MustNewConstMetric(c.schedule.missed, prometheus.CounterValue, float64(s.MissedCount), labels...)
	}
}

// unixSeconds is t in Unix seconds, with its fraction.
func unixSeconds(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler returns an http.Handler serving this collector alone (not the
// process's default registry) in the Prometheus text format.
func (c *Collector) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// limitGauges are the gauges of a queue's configured limits; 0 is no
// limit.
var limitGauges = []struct {
	name, help string
	value      func(litequeue.QueueLimits) float64
}{
	{"concurrency", "The most jobs of the queue running at once across every process (QueueLimits.Concurrency); 0 for no limit.",
		func(l litequeue.QueueLimits) float64 { return float64(l.Concurrency) }},
	{"key_concurrency", "The most jobs of one group running at once (QueueLimits.KeyConcurrency); 0 for no limit.",
		func(l litequeue.QueueLimits) float64 { return float64(l.KeyConcurrency) }},
	{"ordered", "1 when each group's jobs run one at a time in enqueue order (QueueLimits.Ordered), 0 otherwise.",
		func(l litequeue.QueueLimits) float64 { return boolValue(l.Ordered) }},
	{"rate_starts", "The most starts of the queue's jobs per rate_period_seconds (QueueLimits.Rate.N); 0 for no limit.",
		func(l litequeue.QueueLimits) float64 { return float64(l.Rate.N) }},
	{"rate_period_seconds", "The window of QueueLimits.Rate; 0 for no limit.",
		func(l litequeue.QueueLimits) float64 { return l.Rate.Per.Seconds() }},
	{"key_rate_starts", "The most starts of one group's jobs per key_rate_period_seconds (QueueLimits.KeyRate.N); 0 for no limit.",
		func(l litequeue.QueueLimits) float64 { return float64(l.KeyRate.N) }},
	{"key_rate_period_seconds", "The window of QueueLimits.KeyRate; 0 for no limit.",
		func(l litequeue.QueueLimits) float64 { return l.KeyRate.Per.Seconds() }},
}
