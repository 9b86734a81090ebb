package litequeuetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
	"github.com/stretchr/testify/require"
)

// The kit stores the configured limits, and Drain drives a rate-limited
// queue through its windows in virtual time: 2 starts per second, 5 jobs,
// so the last starts 2 seconds in.
func TestDrainDrivesARateLimitInVirtualTime(t *testing.T) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "webhooks", Limits: litequeue.QueueLimits{Rate: litequeue.Rate{N: 2, Per: time.Second}}},
	}})
	var mu sync.Mutex
	var starts []time.Duration
	t0 := k.Clock.Now()
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		mu.Lock()
		starts = append(starts, k.Clock.Now().Sub(t0))
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	ls, err := k.Queue.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, litequeue.Rate{N: 2, Per: time.Second}, ls["webhooks"].Rate, "the kit stored the configured limits")
	for i := range 5 {
		_, err := k.Queue.Enqueue(ctx, Webhook{Order: i}, nil)
		require.NoError(t, err)
	}
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, res.Succeeded)
	require.Equal(t, 2*time.Second, res.Elapsed)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []time.Duration{0, 0, time.Second, time.Second, 2 * time.Second}, starts)
}

// Next runs what a per-group concurrency of 1 allows now and treats the
// job held behind it as not busy; each Next then runs the next one.
func TestNextTreatsJobsHeldByALimitAsNotBusy(t *testing.T) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "webhooks", Limits: litequeue.QueueLimits{Ordered: true}},
	}})
	var mu sync.Mutex
	var order []int
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		mu.Lock()
		order = append(order, d.Job.Order)
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	for i := range 3 {
		_, err := k.Queue.Enqueue(ctx, Webhook{Order: i}, &litequeue.EnqueueOptions{Group: "customer-1"})
		require.NoError(t, err)
	}
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, res.Succeeded)
	require.Zero(t, res.Elapsed)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{0, 1, 2}, order)
}

// Advance runs what a rate allows within the span, no more.
func TestAdvanceStopsAtTheRateWindowsInItsSpan(t *testing.T) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "webhooks", Limits: litequeue.QueueLimits{Rate: litequeue.Rate{N: 2, Per: time.Second}}},
	}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error { return nil })
	ctx := context.Background()
	for i := range 5 {
		_, err := k.Queue.Enqueue(ctx, Webhook{Order: i}, nil)
		require.NoError(t, err)
	}
	res, err := k.Advance(ctx, 1500*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 4, res.Succeeded, "two at 0s, two at 1s")
	require.Equal(t, 1500*time.Millisecond, res.Elapsed)
	res, err = k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, 500*time.Millisecond, res.Elapsed, "the last at 2s")
}
