package litequeue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A queue claims only the kinds it registered, so queues with different
// handlers share one file: a job of a kind it has no handler for is never
// claimed (nor claimed and handed back), and the queue that has the handler
// runs it.
func TestQueueClaimsOnlyItsRegisteredKinds(t *testing.T) {
	a := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 1}}
	})
	Register(a.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	ctx := context.Background()
	// Both due in one claim; the marker comes first in claim order.
	ids, err := a.q.EnqueueBatch(ctx, []BatchItem{{Job: Marker{}}, {Job: SendEmail{To: "x"}}})
	require.NoError(t, err)
	marker, email := ids[0], ids[1]
	a.start(t)
	a.ev.wait(t, EventSucceeded, email, 1) // a's claim has happened
	for _, typ := range []EventType{EventStarted, EventReleased, EventStale, EventDead} {
		require.Zero(t, a.ev.count(typ, marker), "a touched the marker (%s) though it has no handler for it", typ)
	}
	j, err := a.q.Job(ctx, marker)
	require.NoError(t, err)
	require.Equal(t, StateReady, j.State)
	require.Zero(t, j.Attempt)

	b := a.peer(t, 0)
	Register(b.q, func(ctx context.Context, d *Delivery[Marker]) error { return nil })
	b.start(t)
	require.Equal(t, 1, b.ev.wait(t, EventSucceeded, marker, 1).Attempt)
}
