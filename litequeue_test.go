package litequeue

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEnqueuedJobRunsOnceAndIsDeleted(t *testing.T) {
	h := setup(t, nil)
	var got atomic.Value
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		got.Store(d.Job.To)
		return nil
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "a@b.c"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, id, 1)
	require.Equal(t, "a@b.c", got.Load())
	_, err = h.q.Job(context.Background(), id)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, 1, h.ev.count(EventStarted, id))
}

func TestFailureWithoutRetryPolicyIsDeadLetter(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("smtp down")
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, DecisionGiveUp, ev.Decision)
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "smtp down", j.LastError)
	require.Len(t, j.Attempts, 1)
	require.Equal(t, 1, h.ev.count(EventStarted, id))
}

func TestRetriesAtExactlyThePolicyDelays(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: NewRetryPolicy(4, Backoff{Kind: BackoffExponential, Base: time.Second, Factor: 2, Max: time.Hour})}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("transient")
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	for attempt, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		ev := h.ev.wait(t, EventRetrying, id, attempt+1)
		require.Equal(t, delay, ev.Delay)
		j, err := h.q.Job(context.Background(), id)
		require.NoError(t, err)
		require.WithinDuration(t, ev.Time.Add(delay), j.VisibleAt, 0)
		h.clock.Add(delay - time.Nanosecond)
		require.Equal(t, attempt+1, h.ev.count(EventStarted, id), "ran a tick early")
		h.clock.Add(time.Nanosecond)
		h.ev.wait(t, EventStarted, id, attempt+2)
	}
	h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, 4, h.ev.count(EventStarted, id))
}
