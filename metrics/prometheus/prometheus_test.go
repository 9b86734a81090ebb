package prometheus_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/metrics/prometheus"
	"github.com/stretchr/testify/require"
)

type Job struct{}

func (Job) Kind() string { return "job" }

func TestCollectorServesDepthsOutcomesAndLatency(t *testing.T) {
	c := prometheus.NewCollector(nil)
	dead := make(chan struct{}, 1)
	mock := clock.NewMock()
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{Clock: mock, PollInterval: -1,
		OnEvent: func(e litequeue.Event) {
			c.Observe(e)
			if e.Type == litequeue.EventDead {
				dead <- struct{}{}
			}
		}})
	require.NoError(t, err)
	defer q.Close()
	c.SetQueue(q)
	ctx := context.Background()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Job]) error { return errors.New("no") })
	_, err = q.Enqueue(ctx, Job{}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	<-dead
	require.NoError(t, q.Stop(ctx))
	_, err = q.Enqueue(ctx, Job{}, nil)
	require.NoError(t, err)
	mock.Add(90 * time.Second)
	c.Observe(litequeue.Event{Type: litequeue.EventSucceeded, Queue: "default", Kind: "job", Duration: 300 * time.Millisecond})

	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		`litequeue_jobs{queue="default",state="dead"} 1`,
		`litequeue_jobs{queue="default",state="ready"} 1`,
		`litequeue_oldest_ready_seconds{queue="default"} 90`,
		`litequeue_events_total{event="enqueued",kind="job",queue="default"} 2`,
		`litequeue_events_total{event="dead",kind="job",queue="default"} 1`,
		`litequeue_scrape_ok 1`,
		`litequeue_handler_duration_seconds_bucket{kind="job",outcome="succeeded",queue="default",le="0.256"} 0`,
		`litequeue_handler_duration_seconds_bucket{kind="job",outcome="succeeded",queue="default",le="1.024"} 1`,
	} {
		require.Contains(t, body, want)
	}
}
