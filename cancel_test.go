package litequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Cancel refuses a running job with ErrJobRunning and is all or nothing: a
// pending job named with it is not cancelled either, and the running job
// finishes normally.
func TestCancelRefusesARunningJobAndCancelsNothing(t *testing.T) {
	h := setup(t, nil)
	gate, openGate := newGate()
	defer openGate()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-gate
		return nil
	})
	h.start(t)
	ctx := context.Background()
	running, err := h.q.Enqueue(ctx, SendEmail{To: "running"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, running, 1)
	pending, err := h.q.Enqueue(ctx, SendEmail{To: "later"}, &EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)

	n, err := h.q.Cancel(ctx, pending, running)
	require.ErrorIs(t, err, ErrJobRunning)
	require.Zero(t, n)
	for _, id := range []int64{running, pending} {
		_, err := h.q.Job(ctx, id)
		require.NoError(t, err, "job %d must still be there", id)
	}
	openGate()
	h.ev.wait(t, EventSucceeded, running, 1)

	n, err = h.q.Cancel(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = h.q.Job(ctx, pending)
	require.ErrorIs(t, err, ErrNotFound)
}
