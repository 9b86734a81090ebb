package otel_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	lqotel "github.com/litequeue/litequeue/metrics/otel"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

type Job struct{ Fail bool }

func (Job) Kind() string { return "job" }

func TestRecorderCountsEventsAndReadsTheQueue(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec, err := lqotel.New(mp, nil)
	require.NoError(t, err)
	dead := make(chan struct{}, 1)
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{Clock: clock.NewMock(), PollInterval: -1,
		OnEvent: func(e litequeue.Event) {
			rec.Record(e)
			if e.Type == litequeue.EventDead {
				dead <- struct{}{}
			}
		}})
	require.NoError(t, err)
	defer q.Close()
	_, err = rec.ObserveQueue(q)
	require.NoError(t, err)
	ctx := context.Background()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Job]) error { return errors.New("no") })
	_, err = q.Enqueue(ctx, Job{}, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, Job{}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	gone, err := q.Enqueue(ctx, Job{}, &litequeue.EnqueueOptions{Delay: 2 * time.Hour})
	require.NoError(t, err)
	_, err = q.Cancel(ctx, gone)
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	<-dead
	require.NoError(t, q.Stop(ctx))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ev, _ := p.Attributes.Value("event")
					got[m.Name+"/"+ev.AsString()] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					st, _ := p.Attributes.Value("state")
					got[m.Name+"/"+st.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out, _ := p.Attributes.Value("outcome")
					got[m.Name+"/"+out.AsString()] += int64(p.Count)
				}
			}
		}
	}
	require.Equal(t, int64(3), got["litequeue.events/enqueued"])
	require.Equal(t, int64(1), got["litequeue.events/cancelled"])
	require.Equal(t, int64(1), got["litequeue.jobs/cancelled"])
	require.Equal(t, int64(1), got["litequeue.events/dead"])
	require.Equal(t, int64(1), got["litequeue.jobs/dead"])
	require.Equal(t, int64(1), got["litequeue.jobs/scheduled"])
	require.Equal(t, int64(0), got["litequeue.jobs/ready"])
	require.Equal(t, int64(0), got["litequeue.handler.duration/dead"], "a mock clock that stands still gives no duration to record")
}
