package litequeue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

func init() {
	tests = append(tests, struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{"PrefetchHoldsNothingAheadOfSlowHandlersAndUpToTwoBatchesAheadOfFastOnes", testPrefetch})
}

// A queue holds claimed jobs ahead of its handlers by how fast they start
// them, measured through the Clock (Options.ClaimBatch): while its
// handlers start one job per 500ms it holds nothing beyond its busy
// handlers, so a process does not keep jobs leased that another process's
// free workers could run; once they start a hundred in 10ms, it holds more
// than a ClaimBatch ahead of them, up to two (the next claim goes out while
// one waits). The leased rows (Stats' Running) are what the store sees.
func testPrefetch(t *testing.T, b conformanceBackend) {
	const slots, batch, slow = 2, 50, 6
	h := setup(t, b, func(o *litequeue.Options) {
		o.ClaimBatch = batch
		o.Queues = []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Concurrency: slots}}
	})
	proceed, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done) }) // before the harness stops the queue
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		select {
		case <-proceed:
		case <-done:
		}
		return nil
	})
	ctx := context.Background()
	items := make([]litequeue.BatchItem, 300)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Email{To: "x"}}
	}
	_, err := h.Q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	leased := func() int { return statsOf(t, h.Q, litequeue.DefaultQueue).Running }

	h.start(t)
	h.Ev.Wait(t, litequeue.EventStarted, 0, slots)
	require.Eventually(t, func() bool { return leased() == 2*slots }, WaitLimit, time.Millisecond,
		"the first claim takes the handler slots and two allowances of half as many")

	// Slow: one job finishes per 500ms of the Clock. Each finished job
	// starts one more; once the last of them started, every claim it needed
	// has committed, and with both handlers blocked nothing changes until
	// the test lets one finish. (A worker may start its next job after the
	// clock's next step, so up to three starts can fall in one step: even
	// then they are 0.3 jobs in the 50ms horizon, and nothing is held.)
	for range slow {
		h.Clock.Add(500 * time.Millisecond)
		proceed <- struct{}{}
	}
	h.Ev.Wait(t, litequeue.EventStarted, 0, slots+slow)
	h.Ev.Wait(t, litequeue.EventSucceeded, 0, slow)
	require.Equal(t, slots, leased(), "slow handlers: nothing is held beyond the busy handlers")
	// With something held ahead, a claim could still be on its way: give
	// it a moment to land (correct code has none in flight).
	require.Never(t, func() bool { return leased() != slots }, 100*time.Millisecond, 5*time.Millisecond,
		"slow handlers: nothing is claimed ahead later either")

	// Fast: a hundred jobs in the same instant, then one 10ms later.
	for range 100 {
		proceed <- struct{}{}
	}
	h.Clock.Add(10 * time.Millisecond)
	proceed <- struct{}{}
	require.Eventually(t, func() bool { return leased() > slots+batch }, WaitLimit, time.Millisecond,
		"fast handlers: more than a ClaimBatch is claimed ahead (the next claim went out while one waited)")
	// A finished job's row stays leased until its success is written (the
	// successes go out in batches): wait for all 101, so that the leased
	// rows are the two blocked handlers' and those held ahead only.
	h.Ev.Wait(t, litequeue.EventSucceeded, 0, slow+101)
	require.Never(t, func() bool { return leased() > slots+2*batch }, 100*time.Millisecond, 5*time.Millisecond,
		"never more than Concurrency + 2 × ClaimBatch")
}
