package litequeue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Requeue and RequeueAll reset a dead letter's attempts: it runs again as
// attempt 1 with its whole policy ahead of it.
func TestRequeueAndRequeueAllResetAttempts(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, 0)}}
	})
	attempts := make(chan int, 16)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		attempts <- d.Attempt
		return errors.New("down")
	})
	h.start(t)
	ctx := context.Background()
	one, err := h.q.Enqueue(ctx, SendEmail{To: "one"}, nil)
	require.NoError(t, err)
	all, err := h.q.Enqueue(ctx, SendEmail{To: "all"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventDead, one, 1)
	h.ev.wait(t, EventDead, all, 1)
	require.NoError(t, h.q.Stop(ctx))

	n, err := h.q.Requeue(ctx, one)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = h.q.RequeueAll(ctx, DeadFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for _, id := range []int64{one, all} {
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, StateReady, j.State, "job %d", id)
		require.Zero(t, j.Attempt, "job %d: attempts reset", id)
		require.Len(t, j.Attempts, 2, "job %d: the history is kept", id)
	}

	for len(attempts) > 0 {
		<-attempts
	}
	h.start(t)
	h.ev.wait(t, EventDead, one, 2)
	h.ev.wait(t, EventDead, all, 2)
	for _, id := range []int64{one, all} {
		require.Equal(t, 4, h.ev.count(EventStarted, id), "job %d: two attempts before and two after the requeue", id)
		require.Equal(t, 2, h.ev.count(EventRetrying, id), "job %d: one retry before and one after", id)
	}
}

// PurgeDead with OlderThan deletes only the dead letters that died more than
// that long ago.
func TestPurgeDeadOlderThanDeletesOnlyOlderDeadLetters(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("fails for good")
	})
	h.start(t)
	ctx := context.Background()
	old, err := h.q.Enqueue(ctx, SendEmail{To: "old"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventDead, old, 1)
	h.clock.Add(time.Hour)
	recent, err := h.q.Enqueue(ctx, SendEmail{To: "recent"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventDead, recent, 1)
	h.clock.Add(10 * time.Minute) // old died 70m ago, recent 10m ago

	n, err := h.q.PurgeDead(ctx, DeadFilter{OlderThan: 2 * time.Hour})
	require.NoError(t, err)
	require.Zero(t, n, "none died more than 2h ago")
	n, err = h.q.PurgeDead(ctx, DeadFilter{OlderThan: 70 * time.Minute})
	require.NoError(t, err)
	require.Zero(t, n, "old died exactly 70m ago, not more")
	n, err = h.q.PurgeDead(ctx, DeadFilter{OlderThan: 30 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = h.q.Job(ctx, old)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = h.q.DeadLetter(ctx, recent)
	require.NoError(t, err)
	n, err = h.q.PurgeDead(ctx, DeadFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, n, "no OlderThan: any age")
}
