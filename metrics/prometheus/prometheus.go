// Package prometheus exports a litequeue queue's figures to Prometheus:
// per-queue job counts by state and the age of the oldest ready job (read
// from the queue file at each scrape), job events by queue, kind and type,
// and a histogram of handler durations (fed by the queue's OnEvent hook).
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
	up       *prometheus.Desc

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
	return &Collector{
		opts: o,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_total",
			Help: "Job events seen by this process, by queue, kind and event (enqueued, started, succeeded, retrying, dead, requeued, released, stale, duplicate)."},
			[]string{"queue", "kind", "event"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "handler_duration_seconds",
			Help: "How long handlers ran, by queue, kind and outcome (succeeded, retrying, dead).", Buckets: o.Buckets},
			[]string{"queue", "kind", "outcome"}),
		jobs: prometheus.NewDesc(ns+"_jobs", "Jobs in the queue file by queue and state (ready, scheduled, running, completed, dead); counts stop at 100,000 per queue.",
			[]string{"queue", "state"}, nil),
		oldest: prometheus.NewDesc(ns+"_oldest_ready_seconds", "How long the longest-waiting ready job of the queue has been due; 0 when none is ready.",
			[]string{"queue"}, nil),
		up: prometheus.NewDesc(ns+"_scrape_ok", "1 when the last read of the queue file for this scrape succeeded, 0 when it failed.", nil, nil),
	}
}

// SetQueue sets the queue whose file each scrape reads; nil stops the
// reads (the event metrics remain).
func (c *Collector) SetQueue(q *litequeue.Queue) {
	c.mu.Lock()
	c.q = q
	c.mu.Unlock()
}

// Observe counts one event and, for the end of an attempt, its duration.
// Pass it as litequeue.Options.OnEvent (or call it from your own hook). It
// does not block.
func (c *Collector) Observe(e litequeue.Event) {
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
	ch <- c.up
}

// Collect implements prometheus.Collector: the event metrics, then the
// queue file's counts read now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.events.Collect(ch)
	c.duration.Collect(ch)
	c.mu.Lock()
	q := c.q
	c.mu.Unlock()
	if q == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ScrapeTimeout)
	defer cancel()
	sums, err := q.QueueSummaries(ctx, 0)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range sums {
		for state, n := range map[litequeue.State]int{litequeue.StateReady: s.Ready, litequeue.StateScheduled: s.Scheduled,
			litequeue.StateRunning: s.Running, litequeue.StateCompleted: s.Completed, litequeue.StateDead: s.Dead} {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), s.Queue, string(state))
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestReady.Seconds(), s.Queue)
	}
}

// Handler returns an http.Handler serving this collector alone (not the
// process's default registry) in the Prometheus text format.
func (c *Collector) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
