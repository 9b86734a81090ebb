package otel_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	lqotel "github.com/litequeue/litequeue/metrics/otel"
	"github.com/litequeue/litequeue/postgres"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// point is one data point: its instrument, attributes and value.
type point struct {
	name  string
	attrs attribute.Set
	value float64
}

func TestRecorderObservesPausesSchedulesAndDropsAndSkipsProgressOnSQLite(t *testing.T) {
	observes(t, func(o *litequeue.Options) (*litequeue.Queue, error) {
		return litequeue.Open(filepath.Join(t.TempDir(), "q.db"), o)
	})
}

func TestRecorderObservesPausesSchedulesAndDropsAndSkipsProgressOnPostgreSQL(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	observes(t, func(o *litequeue.Options) (*litequeue.Queue, error) {
		return postgres.Open(context.Background(), u, o)
	})
}

// observes checks what the recorder observes of a queue that open opens
// with the options given.
func observes(t *testing.T, open func(*litequeue.Options) (*litequeue.Queue, error)) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec, err := lqotel.New(mp, nil)
	require.NoError(t, err)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q, err := open(&litequeue.Options{Clock: mock, PollInterval: -1, OnEvent: rec.Record})
	require.NoError(t, err)
	defer q.Close()
	_, err = rec.ObserveQueue(q)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = q.Enqueue(ctx, Job{}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Pause(ctx, "reports"))
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "nightly", Cron: "30 2 * * *", Job: Job{}})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "hourly", Cron: "@hourly", Job: Job{}})
	require.NoError(t, err)
	require.NoError(t, q.PauseSchedule(ctx, "hourly"))
	require.NoError(t, q.FlushEvents(ctx))
	rec.Record(litequeue.Event{Type: litequeue.EventProgress, Queue: "default", Kind: "job"})

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	var points []point
	descriptions := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			descriptions[m.Name] = m.Description
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points = append(points, point{m.Name, p.Attributes, float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					points = append(points, point{m.Name, p.Attributes, float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					points = append(points, point{m.Name, p.Attributes, p.Value})
				}
			}
		}
	}
	find := func(name string, kv ...attribute.KeyValue) (float64, bool) {
		want := attribute.NewSet(kv...)
		for _, p := range points {
			if p.name == name && p.attrs.Equals(&want) {
				return p.value, true
			}
		}
		return 0, false
	}
	must := func(name string, kv ...attribute.KeyValue) float64 {
		t.Helper()
		v, ok := find(name, kv...)
		require.True(t, ok, "no point of %s with %v", name, kv)
		return v
	}

	var counted []string
	for _, et := range litequeue.EventTypes() {
		if et != litequeue.EventProgress {
			counted = append(counted, string(et))
		}
	}
	require.Contains(t, descriptions["litequeue.events"], "("+strings.Join(counted, ", ")+")")
	for _, p := range points {
		if p.name == "litequeue.events" {
			ev, _ := p.attrs.Value("event")
			require.NotEqual(t, "progress", ev.AsString(), "progress is not counted")
		}
	}
	require.Equal(t, 1.0, must("litequeue.events", attribute.String("queue", "reports"), attribute.String("kind", ""), attribute.String("event", "paused")))
	require.Equal(t, 1.0, must("litequeue.queue.paused", attribute.String("queue", "reports")))
	require.Equal(t, 0.0, must("litequeue.queue.paused", attribute.String("queue", "default")))
	require.Equal(t, 0.0, must("litequeue.events.dropped"))

	nightly := []attribute.KeyValue{attribute.String("schedule", "nightly"), attribute.String("queue", "default"), attribute.String("kind", "job")}
	hourly := []attribute.KeyValue{attribute.String("schedule", "hourly"), attribute.String("queue", "default"), attribute.String("kind", "job")}
	require.Equal(t, float64(time.Date(2026, 1, 1, 2, 30, 0, 0, time.UTC).Unix()), must("litequeue.schedule.next_run", nightly...))
	_, ok := find("litequeue.schedule.next_run", hourly...)
	require.False(t, ok, "a paused schedule has no next run")
	_, ok = find("litequeue.schedule.last_run", nightly...)
	require.False(t, ok, "no run yet")
	require.Equal(t, 1.0, must("litequeue.schedule.paused", hourly...))
	require.Equal(t, 0.0, must("litequeue.schedule.paused", nightly...))
	require.Equal(t, 0.0, must("litequeue.schedule.missed", nightly...))
}
