package litequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPrefetchFollowsTheStartRate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("starts at half the handler slots, at most ClaimBatch", func(t *testing.T) {
		require.Equal(t, 2, newPrefetch(4, 400).n)
		require.Equal(t, 1, newPrefetch(1, 400).n, "rounded up")
		require.Equal(t, 3, newPrefetch(10, 3).n)
	})
	t.Run("a clock that does not move leaves it as it is", func(t *testing.T) {
		f := newPrefetch(4, 400)
		for range 1000 {
			f.started(t0)
		}
		require.Equal(t, 2, f.n)
	})
	t.Run("fast starts raise it to the horizon's worth", func(t *testing.T) {
		f := newPrefetch(4, 400)
		f.started(t0) // begins the sample
		for i := range 39 {
			f.started(t0.Add(time.Duration(i) * 200 * time.Microsecond))
		}
		require.Equal(t, 2, f.n, "the sample spans less than prefetchSample")
		f.started(t0.Add(prefetchSample)) // 41 starts in 10ms: 4,100 a second
		require.Equal(t, 41, f.n, "10ms of starts at 4,100 a second")
	})
	t.Run("slow claims stretch the horizon to twice their time, at most 50ms", func(t *testing.T) {
		f := newPrefetch(4, 400)
		f.claimed(15 * time.Millisecond)
		f.started(t0)
		for range 40 {
			f.started(t0.Add(time.Millisecond))
		}
		f.started(t0.Add(prefetchSample)) // 4,200 a second
		require.Equal(t, 126, f.n, "30ms of starts at 4,200 a second")
		f.claimed(time.Second)
		for range 41 {
			f.started(t0.Add(prefetchSample + time.Millisecond))
		}
		f.started(t0.Add(2 * prefetchSample))
		require.Equal(t, 210, f.n, "50ms of starts at 4,200 a second")
		f.claimed(time.Millisecond)
		for range 41 {
			f.started(t0.Add(2*prefetchSample + time.Millisecond))
		}
		f.started(t0.Add(3 * prefetchSample))
		require.Equal(t, 42, f.n, "fast claims: 10ms of starts")
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
		f.started(t0.Add(200 * time.Millisecond)) // 2 starts in 200ms: 0.5 jobs in 50ms
		require.Zero(t, f.n)
	})
	t.Run("a start every 50ms or more often holds one ahead", func(t *testing.T) {
		f := newPrefetch(4, 400)
		f.started(t0)
		f.started(t0.Add(30 * time.Millisecond)) // 2 starts in 30ms: 0.67 jobs in 10ms
		require.Equal(t, 1, f.n)
		f.started(t0.Add(130 * time.Millisecond)) // 1 start in 100ms
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
		require.Equal(t, 51, f.n)
	})
}

// The queue-level behaviour (little held ahead of slow handlers, up to two
// ClaimBatches ahead of fast ones) is in the conformance suite
// (conformance_prefetch_test.go), which runs on both backends.

// A pop that raises the allowance wakes a dispatcher whose last claim was
// full, so the larger claim goes out at once instead of at the next freed
// slot — which, with every handler busy, may be long in coming.
func TestALargerAllowanceWakesTheDispatcher(t *testing.T) {
	h, p := backlogPool(t, 50, 3) // no dispatcher: its wake-ups stay in wakeCh
	got, err := p.claim(2)        // the handler slot and the allowance of 1
	require.NoError(t, err)
	require.Equal(t, 2, got)
	p.mu.Lock()
	p.full = true
	p.mu.Unlock()
	woken := func() bool {
		select {
		case <-p.wakeCh:
			return true
		default:
			return false
		}
	}
	woken()
	p.pop(nil) // begins the sample
	require.False(t, woken(), "the allowance did not change")
	h.clock.Add(prefetchSample)
	p.pop(nil) // 2 starts in 10ms: 2 jobs in the 10ms horizon
	require.True(t, woken(), "the allowance grew from 1 to 2: the dispatcher is woken")
}

// A pool draining a backlog claims the next allowance while a whole one
// still waits for its handlers, so that the claim's round trip overlaps
// their work; and it lets free slots gather until an allowance is free
// rather than claim a few rows at a time.
func TestTheNextClaimGoesOutWhileAnAllowanceStillWaits(t *testing.T) {
	_, p := backlogPool(t, 5, 30) // the clock stays put: the allowance does not move
	p.mu.Lock()
	p.prefetch.n = 5
	p.mu.Unlock()
	claimable := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.claimableLocked()
	}
	require.Equal(t, 11, claimable(), "the handler slot and two allowances")
	got, err := p.claim(5)
	require.NoError(t, err)
	require.Equal(t, 5, got)
	require.Equal(t, 6, claimable(), "more than a round is free: claim at once")
	got, err = p.claim(6)
	require.NoError(t, err)
	require.Equal(t, 6, got)
	for i := range 5 { // a job starts and finishes: one more slot free each time
		require.Zero(t, claimable(), "%d free, fewer than an allowance, while %d wait", i, 11-i)
		p.freed(p.pop(nil))
	}
	require.Equal(t, 5, claimable(), "an allowance is free while another (and the slot's job) still waits")
	require.Equal(t, 6, p.queued())
}

// backlogPool returns a queue of one handler slot with claimBatch and jobs
// due jobs, and a detached pool of it (detachedPool): no dispatcher claims
// and no worker runs unless the test does.
func backlogPool(t *testing.T, claimBatch, jobs int) (*harness, *pool) {
	t.Helper()
	h := setup(t, func(o *Options) {
		o.ClaimBatch = claimBatch
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 1}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	for range jobs {
		_, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
		require.NoError(t, err)
	}
	return h, detachedPool(h.q, DefaultQueue)
}
