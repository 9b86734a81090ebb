package litequeue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Due jobs run most urgent priority first, then earliest due first, also
// when the backlog is larger than one claim: with ClaimBatch 1 every claim
// takes one job, so the order comes from the claim, not from sorting a batch.
func TestClaimOrderHoldsAcrossClaims(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.ClaimBatch = 1
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 1}}
	})
	var mu sync.Mutex
	var order []string
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		mu.Lock()
		order = append(order, d.Job.To)
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	now := h.clock.Now()
	for _, j := range []struct {
		name string
		opts EnqueueOptions
	}{
		{"p3", EnqueueOptions{Priority: 3}},
		{"p-2", EnqueueOptions{Priority: -2}},
		{"p7", EnqueueOptions{Priority: 7}},
		{"p0-due-1m-ago", EnqueueOptions{RunAt: now.Add(-time.Minute)}},
		{"p5", EnqueueOptions{Priority: 5}},
		{"p0-due-3m-ago", EnqueueOptions{RunAt: now.Add(-3 * time.Minute)}},
		{"p0-due-2m-ago", EnqueueOptions{RunAt: now.Add(-2 * time.Minute)}},
	} {
		_, err := h.q.Enqueue(ctx, SendEmail{To: j.name}, &j.opts)
		require.NoError(t, err)
	}
	h.start(t)
	h.ev.wait(t, EventSucceeded, 0, 7)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"p-2", "p0-due-3m-ago", "p0-due-2m-ago", "p0-due-1m-ago", "p3", "p5", "p7"}, order)
}

// A delayed job is not claimed before its due time, even by a claim that
// takes the jobs due beside it; at its due time it runs.
func TestDelayedJobIsNotClaimedBeforeItsDueTime(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	ctx := context.Background()
	start := h.clock.Now()
	ids, err := h.q.EnqueueBatch(ctx, []BatchItem{
		{Job: SendEmail{To: "later"}, Options: &EnqueueOptions{Delay: time.Second}},
		{Job: SendEmail{To: "now"}},
	})
	require.NoError(t, err)
	later, now := ids[0], ids[1]
	h.start(t)
	h.ev.wait(t, EventSucceeded, now, 1) // the claim that took it has run
	require.Zero(t, h.ev.count(EventStarted, later), "claimed before its due time")
	j, err := h.q.Job(ctx, later)
	require.NoError(t, err)
	require.Equal(t, StateScheduled, j.State)
	require.Zero(t, j.Attempt)

	h.tc.stepTo(t, start.Add(time.Second), start.Add(DefaultVisibilityTimeout))
	h.ev.wait(t, EventSucceeded, later, 1)
}
