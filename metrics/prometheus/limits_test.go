package prometheus_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/metrics/prometheus"
	"github.com/stretchr/testify/require"
)

// Report is a job of queue "reports".
type Report struct{}

func (Report) Kind() string      { return "report" }
func (Report) QueueName() string { return "reports" }

// The configured limits are gauges by queue, and the ready jobs a
// queue-wide limit holds are counted by reason: two behind a concurrency
// of 1 in one queue, one behind a rate of 1 an hour in another.
func TestLimitsAndHeldJobsAreGauges(t *testing.T) {
	c := prometheus.NewCollector(nil)
	mock := clock.NewMock()
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{Clock: mock, PollInterval: -1,
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Concurrency: 5,
			Limits: litequeue.QueueLimits{Concurrency: 1, KeyConcurrency: 2, Rate: litequeue.Rate{N: 3, Per: 2 * time.Second}}},
			{Name: "reports", Limits: litequeue.QueueLimits{Rate: litequeue.Rate{N: 1, Per: time.Hour}}}}})
	require.NoError(t, err)
	defer q.Close()
	c.SetQueue(q)
	release, started := make(chan struct{}), make(chan struct{}, 3)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Job]) error {
		started <- struct{}{}
		<-release
		return nil
	})
	reported := make(chan struct{}, 2)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Report]) error {
		reported <- struct{}{}
		return nil
	})
	ctx := context.Background()
	for range 2 {
		_, err := q.Enqueue(ctx, Report{}, nil)
		require.NoError(t, err)
	}
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
	<-reported
	q.Notify()
	require.NoError(t, q.FlushEvents(ctx))

	families := scrape(t, c)
	d := map[string]string{"queue": litequeue.DefaultQueue}
	require.Equal(t, 1.0, value(t, families, "litequeue_queue_limit_concurrency", d))
	require.Equal(t, 2.0, value(t, families, "litequeue_queue_limit_key_concurrency", d))
	require.Equal(t, 0.0, value(t, families, "litequeue_queue_limit_ordered", d))
	require.Equal(t, 3.0, value(t, families, "litequeue_queue_limit_rate_starts", d))
	require.Equal(t, 2.0, value(t, families, "litequeue_queue_limit_rate_period_seconds", d))
	require.Equal(t, 0.0, value(t, families, "litequeue_queue_limit_key_rate_starts", d))
	require.Equal(t, 2.0, value(t, families, "litequeue_queue_held_jobs", map[string]string{"queue": litequeue.DefaultQueue, "reason": "concurrency"}),
		"one job runs, the two others are held by the limit of 1")
	require.Equal(t, 0.0, value(t, families, "litequeue_queue_held_jobs", map[string]string{"queue": litequeue.DefaultQueue, "reason": "rate"}))
	require.Equal(t, 1.0, value(t, families, "litequeue_queue_held_jobs", map[string]string{"queue": "reports", "reason": "rate"}),
		"one report started this hour, the other is held by the rate")
	require.Equal(t, 0.0, value(t, families, "litequeue_queue_held_jobs", map[string]string{"queue": "reports", "reason": "concurrency"}))
}
