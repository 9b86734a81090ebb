package litequeue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The dashboard's operator actions of dashboard_api.go (store.Dashboard's
// FinishedCounts, RequeueCancelled and RunNow), on every backend.
func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"FinishedCountsCountByQueueAmongTheLatest", testFinishedCounts},
		{"RequeueCancelledMovesOnlyCancelledJobs", testRequeueCancelled},
		{"RunNowMakesAWaitingJobDueKeepingItsAttempts", testRunNow},
		{"ListDeadGroupPagesAndDeleteDeadGroupDeletesOneGroup", testDeadGroupPagesAndDelete},
	}...)
}

func testFinishedCounts(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	buryAll(t, h, "a", "b", "c")
	var pending []int64
	for i := range 3 {
		id, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Queue: []string{"mail", "mail", "other"}[i], Delay: time.Hour})
		require.NoError(t, err)
		pending = append(pending, id)
	}
	n, err := h.Q.Cancel(ctx, pending...)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	counts, capped, err := h.Q.FinishedCounts(ctx, litequeue.StateCancelled, 0)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"mail": 2, "other": 1}, counts)
	require.False(t, capped)
	counts, capped, err = h.Q.FinishedCounts(ctx, litequeue.StateCancelled, 2)
	require.NoError(t, err)
	require.True(t, capped, "at least 2 cancelled jobs in all")
	total := 0
	for _, c := range counts {
		total += c
	}
	require.Equal(t, 2, total, "among the latest 2")
	counts, capped, err = h.Q.FinishedCounts(ctx, litequeue.StateDead, 10)
	require.NoError(t, err)
	require.Equal(t, map[string]int{litequeue.DefaultQueue: 3}, counts)
	require.False(t, capped)
	counts, _, err = h.Q.FinishedCounts(ctx, litequeue.StateCompleted, 10)
	require.NoError(t, err)
	require.Empty(t, counts)
	_, _, err = h.Q.FinishedCounts(ctx, litequeue.StateReady, 10)
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
}

func testRequeueCancelled(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	keyed, err := h.Q.Enqueue(ctx, Email{To: "k"}, &litequeue.EnqueueOptions{Key: "invoice-7", Delay: time.Hour})
	require.NoError(t, err)
	plain, err := h.Q.Enqueue(ctx, Email{To: "p"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, keyed, plain)
	require.NoError(t, err)

	// The key is free once cancelled; a live holder stops the requeue.
	holder, err := h.Q.Enqueue(ctx, Email{To: "holder"}, &litequeue.EnqueueOptions{Key: "invoice-7"})
	require.NoError(t, err)
	_, err = h.Q.RequeueCancelled(ctx, plain, keyed)
	require.ErrorIs(t, err, litequeue.ErrDuplicate)
	require.Equal(t, litequeue.StateCancelled, state(t, h.Q, plain), "all or nothing")

	_, err = h.Q.RequeueCancelled(ctx, holder)
	require.ErrorIs(t, err, litequeue.ErrWrongState)
	_, err = h.Q.RequeueCancelled(ctx, 999999)
	require.ErrorIs(t, err, litequeue.ErrNotFound)

	n, err := h.Q.RequeueCancelled(ctx, plain)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err := h.Q.Job(ctx, plain)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	require.Equal(t, h.Clock.Now(), j.VisibleAt.UTC(), "due now")
	require.True(t, j.FinishedAt.IsZero())
	h.Ev.Wait(t, litequeue.EventRequeued, plain, 1)
}

func testRunNow(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(3, time.Hour))))
	ctx := context.Background()
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "flaky" && d.Attempt == 1 {
			return errors.New("503")
		}
		return nil
	})
	later, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: 24 * time.Hour})
	require.NoError(t, err)
	flaky, err := h.Q.Enqueue(ctx, Email{To: "flaky"}, nil)
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventRetrying, flaky, 1)
	j, err := h.Q.Job(ctx, flaky)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateScheduled, j.State, "waiting out its backoff")

	for _, id := range []int64{later, flaky} {
		require.NoError(t, h.Q.RunNow(ctx, id))
		h.Ev.Wait(t, litequeue.EventSucceeded, id, 1) // the clock did not move
	}
	j, err = h.Q.Job(ctx, flaky)
	if err == nil {
		require.Equal(t, 2, j.Attempt, "its attempts kept")
	} else {
		require.ErrorIs(t, err, litequeue.ErrNotFound, "succeeded and deleted")
	}
	require.ErrorIs(t, h.Q.RunNow(ctx, 999999), litequeue.ErrNotFound)

	dead, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, dead)
	require.NoError(t, err)
	require.ErrorIs(t, h.Q.RunNow(ctx, dead), litequeue.ErrWrongState, "a cancelled job")
}

func testDeadGroupPagesAndDelete(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	ids := buryAll(t, h, "payment 1 declined", "timeout after 5ms", "payment 2 declined", "payment 3 declined", "timeout after 7ms")
	key := litequeue.NormalizeError("payment 1 declined")

	var walked []int64
	p := litequeue.PageRequest{Limit: 2}
	for {
		pg, err := h.Q.ListDeadGroup(ctx, key, litequeue.JobQuery{}, p)
		require.NoError(t, err)
		for _, j := range pg.Jobs {
			walked = append(walked, j.ID)
			require.Equal(t, litequeue.StateDead, j.State)
		}
		if pg.Next == 0 {
			break
		}
		p.Before = pg.Next
	}
	require.Equal(t, []int64{ids[3], ids[2], ids[0]}, walked, "the group, newest first, paged")
	pg, err := h.Q.ListDeadGroup(ctx, key, litequeue.JobQuery{}, litequeue.PageRequest{Limit: 10, ScanLimit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[3]}, []int64{pg.Jobs[0].ID})
	require.True(t, pg.Partial, "stopped at its scan limit")
	require.Equal(t, ids[3], pg.Next)
	pg, err = h.Q.ListDeadGroup(ctx, key, litequeue.JobQuery{Queue: "elsewhere"}, litequeue.PageRequest{})
	require.NoError(t, err)
	require.Empty(t, pg.Jobs)

	_, err = h.Q.DeleteDeadGroup(ctx, "", litequeue.JobQuery{})
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
	n, err := h.Q.DeleteDeadGroup(ctx, key, litequeue.JobQuery{})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	left, err := h.Q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.NoError(t, err)
	require.Equal(t, 2, left, "the other group stays")
}
