package litequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPrefetchFollowsTheStartRate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("starts at the handler slots, at most ClaimBatch", func(t *testing.T) {
		require.Equal(t, 4, newPrefetch(4, 400).n)
		require.Equal(t, 3, newPrefetch(10, 3).n)
	})
	t.Run("a clock that does not move leaves it as it is", func(t *testing.T) {
		f := newPrefetch(4, 400)
		for range 1000 {
			f.started(t0)
		}
		require.Equal(t, 4, f.n)
	})
	t.Run("fast starts raise it to the horizon's worth", func(t *testing.T) {
		f := newPrefetch(4, 400)
		f.started(t0) // begins the sample
		for i := range 99 {
			f.started(t0.Add(time.Duration(i) * 100 * time.Microsecond))
		}
		require.Equal(t, 4, f.n, "the sample spans less than prefetchSample")
		f.started(t0.Add(prefetchSample)) // 101 starts in 10ms: 10,100 a second
		require.Equal(t, 202, f.n, "20ms of starts at 10,100 a second")
	})
	t.Run("never above ClaimBatch", func(t *testing.T) {
		f := newPrefetch(4, 50)
		f.started(t0)
		for range 1000 {
			f.started(t0.Add(time.Millisecond))
		}
		f.started(t0.Add(prefetchSample))
		require.Equal(t, 50, f.n)
	})
	t.Run("slow starts hold nothing ahead", func(t *testing.T) {
		f := newPrefetch(4, 400)
		f.started(t0)
		f.started(t0.Add(100 * time.Millisecond)) // 2 starts in 100ms: 0.4 jobs in 20ms
		require.Zero(t, f.n)
	})
	t.Run("each sample starts where the last ended", func(t *testing.T) {
		f := newPrefetch(4, 400)
		f.started(t0)
		f.started(t0.Add(time.Second)) // slow: 0
		require.Zero(t, f.n)
		at := t0.Add(time.Second)
		for range 50 {
			f.started(at)
		}
		f.started(at.Add(prefetchSample)) // 51 starts in the 10ms since the last sample
		require.Equal(t, 102, f.n)
	})
}

// allowance reads the prefetch allowance of the running pool of queue name.
func allowance(t *testing.T, q *Queue, name string) int {
	t.Helper()
	q.mu.Lock()
	r := q.run
	q.mu.Unlock()
	require.NotNil(t, r, "the queue is not started")
	p := r.pools[name]
	require.NotNil(t, p, "no pool for queue %q", name)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prefetch.n
}

// A pool holds claimed jobs ahead of its handlers by how fast they start
// them (prefetch.go), through the Clock: while each job takes 100ms it
// holds nothing beyond its busy handlers, so jobs are not kept leased here
// while another process has free workers; once jobs start hundreds to a
// 10ms, it claims ClaimBatch at a time ahead of them. (Whether the last
// free slot is claimed at once or gathers for the next claim depends on
// when the large claim ran, hence the range.)
func TestPrefetchHoldsNothingAheadOfSlowHandlersAndABatchAheadOfFastOnes(t *testing.T) {
	const slots, batch = 2, 50
	h := setup(t, func(o *Options) {
		o.ClaimBatch = batch
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: slots}}
	})
	proceed, done := make(chan struct{}), make(chan struct{})
	defer close(done) // before the harness stops the queue
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		select {
		case <-proceed:
		case <-done:
		}
		return nil
	})
	ctx := context.Background()
	var items []BatchItem
	for range 300 {
		items = append(items, BatchItem{Job: SendEmail{To: "x"}})
	}
	_, err := h.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	h.start(t)
	leased := func() int {
		st, err := h.q.Stats(ctx)
		require.NoError(t, err)
		return st[0].Running
	}
	require.Eventually(t, func() bool { return leased() == 2*slots }, waitLimit, time.Millisecond,
		"the first claim takes the handler slots and as many again")

	// Slow: each job runs 100ms of the Clock.
	for range 6 {
		h.clock.Add(100 * time.Millisecond)
		proceed <- struct{}{}
	}
	require.Eventually(t, func() bool { return allowance(t, h.q, DefaultQueue) == 0 && leased() == slots },
		waitLimit, time.Millisecond, "slow handlers: nothing is held beyond the busy handlers")

	// Fast: 100 jobs in the same instant, then one 10ms later.
	for range 100 {
		proceed <- struct{}{}
	}
	h.clock.Add(prefetchSample)
	proceed <- struct{}{}
	var a, l int
	if !assert.Eventually(t, func() bool { a, l = allowance(t, h.q, DefaultQueue), leased(); return a == batch && l >= batch },
		waitLimit, time.Millisecond, "fast handlers: a ClaimBatch is claimed ahead") {
		t.Fatalf("allowance %d, leased %d", a, l)
	}
	require.LessOrEqual(t, leased(), slots+batch, "never more than Concurrency + ClaimBatch")
}
