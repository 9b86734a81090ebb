package prometheus_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/metrics/prometheus"
	"github.com/litequeue/litequeue/postgres"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrape reads c's exposition over HTTP and parses it.
func scrape(t *testing.T, c *prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, string(body))
	return families
}

// labels returns m's labels as a map.
func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// value returns the value of the sample of family f whose labels are want.
func value(t *testing.T, families map[string]*dto.MetricFamily, f string, want map[string]string) float64 {
	t.Helper()
	fam, ok := families[f]
	require.True(t, ok, "no family %s", f)
	for _, m := range fam.GetMetric() {
		if len(labels(m)) == len(want) {
			match := true
			for k, v := range want {
				match = match && labels(m)[k] == v
			}
			if match {
				switch fam.GetType() {
				case dto.MetricType_COUNTER:
					return m.GetCounter().GetValue()
				case dto.MetricType_GAUGE:
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no sample of %s with labels %v", f, want)
	return 0
}

func TestExpositionNamesHelpTypesAndLabelsOnSQLite(t *testing.T) {
	exposition(t, func(o *litequeue.Options) (*litequeue.Queue, error) {
		return litequeue.Open(filepath.Join(t.TempDir(), "q.db"), o)
	})
}

func TestExpositionNamesHelpTypesAndLabelsOnPostgreSQL(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	exposition(t, func(o *litequeue.Options) (*litequeue.Queue, error) {
		return postgres.Open(context.Background(), u, o)
	})
}

// exposition checks the collector's exposition of a queue that open opens
// with the options given.
func exposition(t *testing.T, open func(*litequeue.Options) (*litequeue.Queue, error)) {
	c := prometheus.NewCollector(nil)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	var hookCalls int
	q, err := open(&litequeue.Options{Clock: mock, PollInterval: -1, EventBuffer: 1,
		OnEvent: func(e litequeue.Event) {
			if hookCalls++; hookCalls == 1 {
				<-release // hold the hook so that later events overflow the buffer of 1
			}
			c.Observe(e)
		}})
	require.NoError(t, err)
	defer q.Close()
	c.SetQueue(q)
	ctx := context.Background()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Job]) error { return errors.New("no") })
	for range 5 {
		_, err = q.Enqueue(ctx, Job{}, nil)
		require.NoError(t, err)
	}
	cancelled, err := q.Enqueue(ctx, Job{}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	_, err = q.Cancel(ctx, cancelled)
	require.NoError(t, err)
	require.NoError(t, q.Pause(ctx, "reports"))
	require.NoError(t, q.SetLimits(ctx, "reports", litequeue.QueueLimits{Concurrency: 4, Ordered: true,
		KeyRate: litequeue.Rate{N: 10, Per: time.Minute}}))
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "nightly", Cron: "30 2 * * *", TimeZone: "Europe/Berlin", Job: Job{}})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "hourly", Cron: "@hourly", Job: Job{}})
	require.NoError(t, err)
	require.NoError(t, q.PauseSchedule(ctx, "hourly"))
	_, err = q.TriggerSchedule(ctx, "nightly")
	require.NoError(t, err)
	close(release)
	require.NoError(t, q.FlushEvents(ctx))
	// Progress reports are not counted.
	c.Observe(litequeue.Event{Type: litequeue.EventProgress, Queue: "default", Kind: "job"})
	c.Observe(litequeue.Event{Type: litequeue.EventPaused, Queue: "reports"})

	families := scrape(t, c)

	// Names follow the conventions: snake case with the namespace, counters
	// end in _total, units are base units in the name.
	name := regexp.MustCompile(`^litequeue_[a-z][a-z0-9_]*$`)
	want := map[string]dto.MetricType{
		"litequeue_events_total":                        dto.MetricType_COUNTER,
		"litequeue_events_dropped_total":                dto.MetricType_COUNTER,
		"litequeue_jobs":                                dto.MetricType_GAUGE,
		"litequeue_oldest_ready_seconds":                dto.MetricType_GAUGE,
		"litequeue_queue_paused":                        dto.MetricType_GAUGE,
		"litequeue_schedule_next_run_timestamp_seconds": dto.MetricType_GAUGE,
		"litequeue_schedule_last_run_timestamp_seconds": dto.MetricType_GAUGE,
		"litequeue_schedule_paused":                     dto.MetricType_GAUGE,
		"litequeue_schedule_missed_total":               dto.MetricType_COUNTER,
		"litequeue_scrape_ok":                           dto.MetricType_GAUGE,
		"litequeue_queue_limit_concurrency":             dto.MetricType_GAUGE,
		"litequeue_queue_limit_key_concurrency":         dto.MetricType_GAUGE,
		"litequeue_queue_limit_ordered":                 dto.MetricType_GAUGE,
		"litequeue_queue_limit_rate_starts":             dto.MetricType_GAUGE,
		"litequeue_queue_limit_rate_period_seconds":     dto.MetricType_GAUGE,
		"litequeue_queue_limit_key_rate_starts":         dto.MetricType_GAUGE,
		"litequeue_queue_limit_key_rate_period_seconds": dto.MetricType_GAUGE,
		"litequeue_queue_held_jobs":                     dto.MetricType_GAUGE,
	}
	for n, typ := range want {
		f, ok := families[n]
		require.True(t, ok, "missing %s", n)
		require.Equal(t, typ, f.GetType(), n)
		require.NotEmpty(t, f.GetHelp(), n)
	}
	for n, f := range families {
		require.Regexp(t, name, n)
		require.Equal(t, f.GetType() == dto.MetricType_COUNTER, strings.HasSuffix(n, "_total"), "%s: only counters end in _total", n)
		for _, m := range f.GetMetric() {
			for l := range labels(m) {
				require.Regexp(t, `^[a-z][a-z0-9_]*$`, l, n)
			}
		}
	}

	// The events counter's HELP names exactly the events it counts: every
	// event type the queue reports, but progress.
	help := families["litequeue_events_total"].GetHelp()
	listed := regexp.MustCompile(`\(([a-z_, ]+)\)`).FindStringSubmatch(help)
	require.NotNil(t, listed, help)
	var counted []string
	for _, et := range litequeue.EventTypes() {
		if et != litequeue.EventProgress {
			counted = append(counted, string(et))
		}
	}
	require.Equal(t, counted, strings.Split(listed[1], ", "))
	require.Contains(t, help, "Progress reports are not counted")
	for _, m := range families["litequeue_events_total"].GetMetric() {
		l := labels(m)
		require.True(t, slices.Contains(counted, l["event"]), "counted an event the HELP does not name: %v", l)
		require.Equal(t, []string{"event", "kind", "queue"}, slices.Sorted(func(yield func(string) bool) {
			for k := range l {
				if !yield(k) {
					return
				}
			}
		}))
	}
	require.Equal(t, 1.0, value(t, families, "litequeue_events_total", map[string]string{"queue": "reports", "kind": "", "event": "paused"}))

	// Dropped events: the buffer of 1 overflowed while the hook was held.
	require.Positive(t, q.DroppedEvents())
	require.Equal(t, float64(q.DroppedEvents()), value(t, families, "litequeue_events_dropped_total", nil))

	// Jobs by state, cancelled ones too.
	require.Equal(t, 6.0, value(t, families, "litequeue_jobs", map[string]string{"queue": "default", "state": "ready"}), "five and the triggered schedule's")
	require.Equal(t, 1.0, value(t, families, "litequeue_jobs", map[string]string{"queue": "default", "state": "cancelled"}))
	require.Contains(t, families["litequeue_jobs"].GetHelp(), "cancelled")

	// Paused per queue, a queue with no jobs too.
	require.Equal(t, 1.0, value(t, families, "litequeue_queue_paused", map[string]string{"queue": "reports"}))
	require.Equal(t, 0.0, value(t, families, "litequeue_queue_paused", map[string]string{"queue": "default"}))

	// Schedules.
	nightly := map[string]string{"schedule": "nightly", "queue": "default", "kind": "job"}
	hourly := map[string]string{"schedule": "hourly", "queue": "default", "kind": "job"}
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.Equal(t, float64(time.Date(2026, 1, 1, 2, 30, 0, 0, berlin).Unix()), value(t, families, "litequeue_schedule_next_run_timestamp_seconds", nightly))
	require.Equal(t, float64(mock.Now().Unix()), value(t, families, "litequeue_schedule_last_run_timestamp_seconds", nightly))
	require.Equal(t, 0.0, value(t, families, "litequeue_schedule_paused", nightly))
	require.Equal(t, 1.0, value(t, families, "litequeue_schedule_paused", hourly))
	require.Equal(t, 0.0, value(t, families, "litequeue_schedule_missed_total", nightly))
	for _, m := range families["litequeue_schedule_next_run_timestamp_seconds"].GetMetric() {
		require.NotEqual(t, "hourly", labels(m)["schedule"], "a paused schedule has no next run")
	}
	require.Equal(t, 1.0, value(t, families, "litequeue_scrape_ok", nil))
}
