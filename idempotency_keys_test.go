package litequeue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Once the job holding an idempotency key died, the key is free again: a new
// job with it is enqueued (in the duplicate check and in the unique index).
// Requeueing the dead letter while the new job holds the key is refused with
// a *DuplicateError naming the holder, and moves nothing.
func TestDeadJobsKeyIsFreeAndRequeueNamesTheNewHolder(t *testing.T) {
	h := setup(t, nil) // default policy: the first failure is final
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("fails for good")
	})
	h.start(t)
	ctx := context.Background()
	dead, err := h.q.Enqueue(ctx, SendEmail{To: "first"}, &EnqueueOptions{Key: "order:7"})
	require.NoError(t, err)
	h.ev.wait(t, EventDead, dead, 1)
	require.NoError(t, h.q.Stop(ctx)) // the next job stays pending

	holder, err := h.q.Enqueue(ctx, SendEmail{To: "second"}, &EnqueueOptions{Key: "order:7"})
	require.NoError(t, err, "the dead job's key must be free again")
	require.NotEqual(t, dead, holder)

	moved, err := h.q.Requeue(ctx, dead)
	require.ErrorIs(t, err, ErrDuplicate)
	var dup *DuplicateError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, holder, dup.ID, "the error names the live holder")
	require.Equal(t, "order:7", dup.Key)
	require.Zero(t, moved)

	moved, err = h.q.RequeueAll(ctx, DeadFilter{})
	require.NoError(t, err)
	require.Zero(t, moved, "RequeueAll leaves a dead letter whose key is held")
	j, err := h.q.Job(ctx, dead)
	require.NoError(t, err)
	require.Equal(t, StateDead, j.State)
}

// Requeue is all or nothing when two dead letters share a key: the second
// would collide with the first, so neither moves.
func TestRequeueOfTwoDeadLettersWithOneKeyMovesNeither(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("fails for good")
	})
	h.start(t)
	ctx := context.Background()
	var ids []int64
	for range 2 {
		id, err := h.q.Enqueue(ctx, SendEmail{To: "x"}, &EnqueueOptions{Key: "k"})
		require.NoError(t, err)
		h.ev.wait(t, EventDead, id, 1)
		ids = append(ids, id)
	}
	require.NoError(t, h.q.Stop(ctx))
	moved, err := h.q.Requeue(ctx, ids...)
	var dup *DuplicateError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, ids[0], dup.ID)
	require.Zero(t, moved)
	for _, id := range ids {
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, StateDead, j.State)
	}
}

// A completed job kept by CompletedRetention no longer holds its key.
func TestRetainedCompletedJobsKeyIsFree(t *testing.T) {
	h := setup(t, func(o *Options) { o.CompletedRetention = time.Hour })
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	h.start(t)
	ctx := context.Background()
	done, err := h.q.Enqueue(ctx, SendEmail{To: "x"}, &EnqueueOptions{Key: "k"})
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, done, 1)
	again, err := h.q.Enqueue(ctx, SendEmail{To: "y"}, &EnqueueOptions{Key: "k"})
	require.NoError(t, err)
	require.NotEqual(t, done, again)
}
