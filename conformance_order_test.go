package litequeue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The order tests of the suite: jobs start in priority, then due-time order,
// also when an enqueue hands its job straight to an idle worker.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"DirectHandOffNeverOvertakesADueJob", testHandOffOrder},
	}...)
}

func testHandOffOrder(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Concurrency: 1}))
	var mu sync.Mutex
	var order []int64
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		mu.Lock()
		order = append(order, d.ID)
		mu.Unlock()
		return nil
	})
	ran := func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), order...)
	}
	enqueue := func(q *litequeue.Queue, to string, o *litequeue.EnqueueOptions) int64 {
		id, err := q.Enqueue(ctx, Email{To: to}, o)
		require.NoError(t, err)
		return id
	}
	h.start(t)
	warm := enqueue(h.Q, "warm-up", nil)
	h.Ev.Wait(t, litequeue.EventSucceeded, warm, 1)

	// Another process stores jobs; this idle queue then enqueues its own.
	other := open(t, b, h.Addr, h.Clock.Now(), nil)
	urgent := enqueue(other.Q, "urgent", &litequeue.EnqueueOptions{Priority: -5})
	older := enqueue(other.Q, "older", &litequeue.EnqueueOptions{Priority: 10})
	mine := enqueue(h.Q, "mine", &litequeue.EnqueueOptions{Priority: 10})
	h.Ev.Wait(t, litequeue.EventSucceeded, mine, 1)
	h.Ev.Wait(t, litequeue.EventSucceeded, older, 1)
	require.Equal(t, []int64{warm, urgent, older, mine}, ran(), "more urgent, then older, then the new job")

	// Only a more urgent job is due, none of the new job's priority.
	enqueue(other.Q, "urgent but later", &litequeue.EnqueueOptions{Priority: -9, RunAt: h.Clock.Now().Add(time.Hour)})
	urgent2 := enqueue(other.Q, "urgent", &litequeue.EnqueueOptions{Priority: -5})
	mine2 := enqueue(h.Q, "mine", nil)
	h.Ev.Wait(t, litequeue.EventSucceeded, mine2, 1)
	h.Ev.Wait(t, litequeue.EventSucceeded, urgent2, 1)
	require.Equal(t, []int64{warm, urgent, older, mine, urgent2, mine2}, ran(), "the due priority -5 job before the new priority 0 one")

	// Sequential enqueues of one priority run in id order.
	var want []int64
	for range 50 {
		want = append(want, enqueue(h.Q, "seq", nil))
	}
	h.Ev.Wait(t, litequeue.EventSucceeded, want[len(want)-1], 1)
	require.Equal(t, want, ran()[6:], "jobs of one priority due at once run in id order")
}
