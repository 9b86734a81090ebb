package litequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With every handler slot busy, jobs claimed ahead wait unstarted: with
// Concurrency 3 and ClaimBatch 1 the queue claims five jobs (its slots and
// two allowances of one), three run (and block), and the other two are
// still unstarted when Stop begins, so Stop hands them back at once. A
// fourth handler would have taken one.
func TestBusyHandlersLeaveTheJobClaimedAheadUnstarted(t *testing.T) {
	const limit = 3
	h := setup(t, func(o *Options) {
		o.ClaimBatch = 1
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: limit}}
	})
	gate, openGate := newGate()
	defer openGate()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-gate
		return nil
	})
	ctx := context.Background()
	var items []BatchItem
	for range 20 {
		items = append(items, BatchItem{Job: SendEmail{To: "x"}})
	}
	_, err := h.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	h.start(t)
	h.ev.wait(t, EventStarted, 0, limit)
	require.Eventually(t, func() bool { // the claims run one job at a time
		st, err := h.q.Stats(ctx)
		require.NoError(t, err)
		return st[0].Running == limit+2
	}, waitLimit, time.Millisecond, "the queue claims Concurrency + 2 × ClaimBatch jobs")

	stopped := make(chan error, 1)
	go func() { stopped <- h.q.Stop(context.Background()) }()
	released := h.ev.wait(t, EventReleased, 0, 1)
	require.Zero(t, h.ev.count(EventStarted, released.JobID), "the released job had started")
	openGate()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("Stop did not return after the handlers finished")
	}
	h.ev.wait(t, EventSucceeded, 0, limit) // emitted just after the commit Stop waits for
	require.Equal(t, limit, h.ev.count(EventStarted, 0), "handlers started")
	require.Equal(t, 2, h.ev.count(EventReleased, 0), "two jobs were claimed ahead")
}
