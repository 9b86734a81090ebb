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
