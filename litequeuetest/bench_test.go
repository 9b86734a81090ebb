package litequeuetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// BenchmarkDrainADayOfRetries measures the real time a Kit takes to drive
// one job through 24 hourly retries to the dead letters, with default
// Options: 24 hours of virtual time per op.
func BenchmarkDrainADayOfRetries(b *testing.B) {
	for b.Loop() {
		k := litequeuetest.New(b, &litequeue.Options{Queues: []litequeue.QueueConfig{
			{Name: "webhooks", Retry: litequeue.FixedRetry(25, time.Hour)},
		}})
		litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error { return errDown })
		if _, err := k.Queue.Enqueue(context.Background(), Webhook{}, nil); err != nil {
			b.Fatal(err)
		}
		res, err := k.Drain(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if res.Died != 1 || res.Elapsed != 24*time.Hour {
			b.Fatalf("ran %d, retried %d, died %d after %s, unhandled %d", res.Ran, res.Retried, res.Died, res.Elapsed, res.Unhandled)
		}
	}
}
