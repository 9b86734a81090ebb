package litequeue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/kitlink"
)

// TestProgressHubForgetsAnAttemptWhenItsHandlerReturns: the latest report
// the hub keeps for new watchers lives only while its handler runs, on a
// failed attempt as on a successful one.
func TestProgressHubForgetsAnAttemptWhenItsHandlerReturns(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Second)}}
	})
	held := make(chan int, 2)
	release := make(chan struct{}, 2)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if err := d.SetProgress(0.5, "half"); err != nil {
			return err
		}
		held <- d.Attempt
		<-release
		if d.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	})
	current := func(id int64) (Progress, bool) {
		hub := h.q.progressHub()
		hub.mu.Lock()
		defer hub.mu.Unlock()
		p, ok := hub.current[id]
		return p, ok
	}
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.start(t)
	require.Equal(t, 1, <-held)
	p, ok := current(id)
	require.True(t, ok, "kept while the handler runs")
	require.Equal(t, 0.5, p.Fraction)
	release <- struct{}{}
	h.ev.wait(t, EventRetrying, id, 1)
	_, ok = current(id)
	require.False(t, ok, "kept after a failed attempt")
	h.clock.Add(time.Second)
	require.Equal(t, 2, <-held)
	release <- struct{}{}
	h.ev.wait(t, EventSucceeded, id, 1)
	_, ok = current(id)
	require.False(t, ok, "kept after the success")
}

// TestProgressHubKeepsNothingOfAnUnclaimedRun: the test kit's Work runs a
// handler with a queue's configuration but no claim, so no attempt ends to
// forget its report; the hub must not keep it (a later watch of a job with
// the same id would start from it).
func TestProgressHubKeepsNothingOfAnUnclaimedRun(t *testing.T) {
	h := setup(t, nil)
	hv := captureHandler(func(q *Queue) {
		Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
			return d.SetProgress(0.5, "half")
		})
	})
	require.NoError(t, runHandler(context.Background(), hv, h.q, []byte(`{"to":"x"}`), kitlink.Spec{ID: 1, Attempt: 1}))
	hub := h.q.progressHub()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	require.Empty(t, hub.current)
}
