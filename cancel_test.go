package litequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Cancel is all or nothing: a finished job named with pending and running
// ones fails with ErrWrongState, and neither is cancelled; the running job
// then finishes normally.
func TestCancelRefusesAFinishedJobAndCancelsNothing(t *testing.T) {
	h := setup(t, func(o *Options) { o.CompletedRetention = time.Hour })
	gate, openGate := newGate()
	defer openGate()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Job.To == "running" {
			<-gate
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	done, err := h.q.Enqueue(ctx, SendEmail{To: "done"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, done, 1)
	running, err := h.q.Enqueue(ctx, SendEmail{To: "running"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, running, 1)
	pending, err := h.q.Enqueue(ctx, SendEmail{To: "later"}, &EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)

	n, err := h.q.Cancel(ctx, pending, running, done)
	require.ErrorIs(t, err, ErrWrongState)
	require.ErrorContains(t, err, "it is completed already")
	require.Zero(t, n)
	for id, want := range map[int64]State{running: StateRunning, pending: StateScheduled, done: StateCompleted} {
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, j.State, "job %d", id)
	}
	openGate()
	h.ev.wait(t, EventSucceeded, running, 1)

	n, err = h.q.Cancel(ctx, pending, pending)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err := h.q.Job(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, StateCancelled, j.State)
	_, err = h.q.Cancel(ctx, pending)
	require.ErrorIs(t, err, ErrWrongState, "cancelling a cancelled job")
	_, err = h.q.Cancel(ctx, 999)
	require.ErrorIs(t, err, ErrNotFound)
}
