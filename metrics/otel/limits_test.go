package otel_test

import (
	"context"
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

// The configured limits are gauges by queue, and the ready jobs a
// queue-wide concurrency limit holds are counted by reason.
func TestObserveQueueReadsLimitsAndHeldJobs(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	rec, err := lqotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), nil)
	require.NoError(t, err)
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{Clock: clock.NewMock(), PollInterval: -1,
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Concurrency: 5,
			Limits: litequeue.QueueLimits{Concurrency: 1, Ordered: true, KeyRate: litequeue.Rate{N: 4, Per: time.Minute}}}}})
	require.NoError(t, err)
	defer q.Close()
	_, err = rec.ObserveQueue(q)
	require.NoError(t, err)
	release, started := make(chan struct{}), make(chan struct{}, 3)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Job]) error {
		started <- struct{}{}
		<-release
		return nil
	})
	ctx := context.Background()
	for range 3 {
		_, err := q.Enqueue(ctx, Job{}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Start(ctx))
	defer func() {
		close(release)
		require.NoError(t, q.Stop(ctx))
	}()
	<-started
	q.Notify()
	require.NoError(t, q.FlushEvents(ctx))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Gauge[float64]); ok {
				for _, p := range d.DataPoints {
					qn, _ := p.Attributes.Value("queue")
					r, _ := p.Attributes.Value("reason")
					got[m.Name+"/"+qn.AsString()+"/"+r.AsString()] = p.Value
				}
			}
		}
	}
	require.Equal(t, 1.0, got["litequeue.queue.limit.concurrency/default/"])
	require.Equal(t, 1.0, got["litequeue.queue.limit.ordered/default/"])
	require.Equal(t, 4.0, got["litequeue.queue.limit.key_rate.starts/default/"])
	require.Equal(t, 60.0, got["litequeue.queue.limit.key_rate.period/default/"])
	require.Equal(t, 2.0, got["litequeue.queue.held_jobs/default/concurrency"], "one job runs, two are held by the limit of 1")
	require.Equal(t, 0.0, got["litequeue.queue.held_jobs/default/rate"])
}
