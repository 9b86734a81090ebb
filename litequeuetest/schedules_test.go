package litequeuetest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// Tick is the job of the tests' schedules.
type Tick struct{}

func (Tick) Kind() string { return "tick" }

// tickKit is a kit with a schedule enqueueing a Tick every interval and a
// handler counting them.
func tickKit(t *testing.T, every time.Duration) (*litequeuetest.Kit, *atomic.Int32) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: litequeue.DefaultQueue, Retry: litequeue.NoRetry()},
		{Name: "webhooks", Retry: litequeue.NoRetry()},
	}})
	var ran atomic.Int32
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Tick]) error {
		ran.Add(1)
		return nil
	})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error { return nil })
	_, err := k.Queue.RegisterSchedule(context.Background(), litequeue.Schedule{Name: "tick", Every: every, Job: Tick{}})
	require.NoError(t, err)
	return k, &ran
}

func missed(t *testing.T, k *litequeuetest.Kit) int64 {
	t.Helper()
	ss, err := k.Queue.Schedules(context.Background())
	require.NoError(t, err)
	require.Len(t, ss, 1)
	return ss[0].MissedCount
}

// Advance runs a day of a schedule every 10 minutes: each of its 144
// occurrences on time, none missed.
func TestAdvanceRunsEveryOccurrenceOfADay(t *testing.T) {
	k, ran := tickKit(t, 10*time.Minute)
	res, err := k.Advance(context.Background(), 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, int32(144), ran.Load())
	require.Equal(t, 144, res.Succeeded)
	require.Equal(t, 24*time.Hour, res.Elapsed)
	require.Zero(t, missed(t, k))
	_, err = k.Advance(context.Background(), -time.Second)
	require.Error(t, err)
}

// A bare Clock.Add jumps over the occurrences: Drain then runs what the
// schedule's Missed policy allows (the default: the latest missed one,
// once, besides the one on time) and the rest are counted as missed, not
// run.
func TestDrainAfterAClockJumpRunsWhatTheMissedPolicyAllows(t *testing.T) {
	k, ran := tickKit(t, time.Minute)
	// The jump comes before Start: a started scheduler would be woken by
	// the mock clock at each minute it steps through, and see as many of
	// the occurrences as it had re-armed for in time.
	k.Clock.Add(24 * time.Hour)
	k.Start()
	res, err := k.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, int32(2), ran.Load())
	require.Equal(t, 2, res.Succeeded)
	require.Equal(t, int64(1440-2), missed(t, k), "every other occurrence of the day is counted")
}

// Drain stops at each occurrence on its way to a job due later, so the
// occurrences run on time; schedules alone do not keep it going.
func TestDrainRunsTheOccurrencesOnItsWay(t *testing.T) {
	k, ran := tickKit(t, 10*time.Minute)
	_, err := k.Queue.Enqueue(context.Background(), Webhook{}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	res, err := k.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, int32(6), ran.Load(), "10, 20, ... 60 minutes")
	require.Equal(t, 7, res.Succeeded)
	require.Equal(t, time.Hour, res.Elapsed)
	require.Zero(t, missed(t, k))
	res, err = k.Drain(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Ran, "nothing but the schedule left: Drain ends")
}

// Wait counts only the events emitted after the call; WaitFor any since New.
func TestWaitCountsOnlyEventsAfterTheCall(t *testing.T) {
	k := webhookKit(t, 1)
	ctx := context.Background()
	first, err := k.Queue.Enqueue(ctx, Webhook{Order: 1}, nil)
	require.NoError(t, err)
	require.NoError(t, k.Queue.FlushEvents(ctx))
	enqueued := func(e litequeue.Event) bool { return e.Type == litequeue.EventEnqueued }

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = k.Wait(short, enqueued)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the earlier enqueue does not count")

	// Jobs are enqueued until Wait returns, so none of them can come too
	// early for it to see; the one it sees must be one of them.
	stop, later := make(chan struct{}), make(chan map[int64]bool, 1)
	go func() {
		ids := map[int64]bool{}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if id, err := k.Queue.Enqueue(ctx, Webhook{Order: 2 + len(ids)}, nil); err == nil {
				ids[id] = true
			}
			select {
			case <-stop:
				later <- ids
				return
			case <-tick.C:
			}
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	e, err := k.Wait(wctx, enqueued)
	close(stop)
	require.NoError(t, err)
	require.NotEqual(t, first, e.JobID, "Wait returned the enqueue from before the call")
	require.True(t, (<-later)[e.JobID], "Wait returned job %d, not one enqueued after the call", e.JobID)
	require.Equal(t, first, k.WaitFor(litequeue.EventEnqueued, 0).JobID, "WaitFor counts earlier events")
}
