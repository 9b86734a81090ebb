package litequeuetest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// Through records a snooze as the worker does: the stored job is
// scheduled after the snooze, its attempt given back; a retry is scheduled
// too (the test's pool has no dispatcher to wake).
func TestWorkThroughRecordsASnoozeAndARetry(t *testing.T) {
	mock := clock.NewMock()
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{Clock: mock, Queues: []litequeue.QueueConfig{
		{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(3, time.Minute)}}})
	require.NoError(t, err)
	defer q.Close()
	snooze := func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		if d.Job.Order < 0 {
			return errDown
		}
		return litequeue.Snooze(time.Hour)
	}
	err = litequeuetest.Work(t, snooze, Receipt{Order: 1}, litequeuetest.Through(q))
	var se *litequeue.SnoozeError
	require.ErrorAs(t, err, &se)
	jobs, err := q.Jobs(context.Background(), litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, litequeue.StateScheduled, jobs[0].State)
	require.Equal(t, 0, jobs[0].Attempt, "a snooze uses no attempt")
	require.True(t, jobs[0].VisibleAt.Equal(mock.Now().Add(time.Hour)))

	require.ErrorIs(t, litequeuetest.Work(t, snooze, Receipt{Order: -1}, litequeuetest.Through(q)), errDown)
	jobs, err = q.Jobs(context.Background(), litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, litequeue.StateScheduled, jobs[0].State, "the failure is retried in a minute")
}

// Drain and Settle follow a snooze: the attempt's end is the snooze, and
// the kit moves the clock to the snoozed due time, where the job runs
// again with the same attempt number.
func TestDrainAndSettleFollowASnooze(t *testing.T) {
	k := litequeuetest.New(t, nil)
	var runs []int
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		runs = append(runs, d.Attempt)
		if len(runs)%3 != 0 {
			return litequeue.Snooze(time.Hour)
		}
		return nil
	})
	ctx := context.Background()
	_, err := k.Queue.Enqueue(ctx, Receipt{Order: 1}, nil)
	require.NoError(t, err)
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, res.Ran)
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, 2*time.Hour, res.Elapsed, "the clock moved to each snoozed due time")
	require.Equal(t, []int{1, 1, 1}, runs, "a snooze uses no attempt")

	id, err := k.Queue.Enqueue(ctx, Receipt{Order: 2}, nil)
	require.NoError(t, err)
	r, err := k.Settle(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.EventSucceeded, r.Outcome)
	require.Equal(t, 2*time.Hour, r.Elapsed)
	var types []litequeue.EventType
	for _, e := range r.History {
		if e.Type != litequeue.EventEnqueued { // handed straight to the idle worker, it may come after the start
			types = append(types, e.Type)
		}
	}
	require.Equal(t, []litequeue.EventType{litequeue.EventStarted, litequeue.EventSnoozed,
		litequeue.EventStarted, litequeue.EventSnoozed, litequeue.EventStarted, litequeue.EventSucceeded}, types)
}

// A job that snoozes forever ends as QueueConfig.MaxSnoozes says: the
// snooze past the limit is a failed attempt (a *SnoozeLimitError), which the
// retry policy retries — every later snooze fails too — until it gives up.
func TestSettleOfAJobThatSnoozesForeverEndsAtMaxSnoozes(t *testing.T) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(2, time.Minute), MaxSnoozes: 3}}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		return litequeue.Snooze(time.Hour)
	})
	ctx := context.Background()
	id, err := k.Queue.Enqueue(ctx, Receipt{Order: 1}, nil)
	require.NoError(t, err)
	r, err := k.Settle(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.EventDead, r.Outcome)
	require.Equal(t, 2, r.Attempts)
	require.Equal(t, 3*time.Hour+time.Minute, r.Elapsed, "three snoozes of an hour, then the retry's minute")
	var snoozes, failures int
	for _, e := range r.History {
		switch e.Type {
		case litequeue.EventSnoozed:
			snoozes++
		case litequeue.EventRetrying, litequeue.EventDead:
			failures++
			var le *litequeue.SnoozeLimitError
			require.ErrorAs(t, e.Err, &le)
			require.Equal(t, 3, le.Max)
		}
	}
	require.Equal(t, 3, snoozes)
	require.Equal(t, 2, failures)
	require.Contains(t, r.Job.LastError, "snoozed 3 times")
}

// Drain follows a running job that is cancelled: its attempt ends with
// EventCancelled, and the drain ends.
func TestDrainEndsAfterARunningJobIsCancelled(t *testing.T) {
	k := litequeuetest.New(t, nil)
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		if _, err := k.Queue.Cancel(context.WithoutCancel(ctx), d.ID); err != nil {
			return err
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	ctx := context.Background()
	id, err := k.Queue.Enqueue(ctx, Receipt{Order: 1}, nil)
	require.NoError(t, err)
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Ran)
	j, err := k.Queue.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, j.State)
}
