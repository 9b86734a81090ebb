package litequeue

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Stop and Close leave no goroutine behind: not the dispatchers, workers,
// lease extenders and poller of Start, nor the writer and the database
// handles of Open.
func TestStopAndCloseLeaveNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(path, &Options{PollInterval: 5 * time.Millisecond, CompletedRetention: time.Hour,
		Queues: []QueueConfig{{Name: "media", Concurrency: 4, Timeout: time.Minute}}})
	require.NoError(t, err)
	done := make(chan struct{}, 100)
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error { done <- struct{}{}; return nil })
	Register(q, func(ctx context.Context, d *Delivery[Resize]) error { done <- struct{}{}; return nil })
	ctx := context.Background()
	for round := range 2 { // Stop, then Start again on the same queue
		require.NoError(t, q.Start(ctx))
		for i := range 10 {
			_, err := q.Enqueue(ctx, SendEmail{}, nil)
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, Resize{N: i}, nil)
			require.NoError(t, err)
		}
		for range 20 {
			select {
			case <-done:
			case <-time.After(waitLimit):
				t.Fatalf("round %d: jobs did not run", round)
			}
		}
		stopCtx, cancel := context.WithTimeout(ctx, waitLimit)
		require.NoError(t, q.Stop(stopCtx))
		cancel()
	}
	require.NoError(t, q.Close())

	ro, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	_, err = ro.Stats(ctx)
	require.NoError(t, err)
	require.NoError(t, ro.Close())
}

// A queue whose Start context is cancelled stops by itself and, once
// closed, leaves nothing running.
func TestCancelledStartContextLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	q, err := Open(filepath.Join(t.TempDir(), "q.db"), nil)
	require.NoError(t, err)
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, q.Start(ctx))
	cancel()
	require.NoError(t, q.Close())
}
