package litequeue_test

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// QueueConfig.OnCancel: a follow-up enqueued in the cancelling transaction.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"OnCancelFollowsPendingScheduledAndRunningJobsOnce", testOnCancel},
		{"OnCancelFollowsEachJobOfABulkCancel", testOnCancelBulk},
		{"OnCancelEnqueuesNothingWhenTheCancelFails", testOnCancelAllOrNothing},
		{"OnCancelFollowUpWithAHeldKeyOrInvalidIsLeftOut", testOnCancelSkipped},
	}...)
}

// cancelRecorder is an OnCancel that records what it was asked and answers
// an Audit naming the cancelled job.
type cancelRecorder struct {
	mu    sync.Mutex
	infos map[int64][]litequeue.JobInfo
	opts  *litequeue.EnqueueOptions
}

func (r *cancelRecorder) hook(info litequeue.JobInfo) (litequeue.Job, *litequeue.EnqueueOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.infos == nil {
		r.infos = map[int64][]litequeue.JobInfo{}
	}
	r.infos[info.ID] = append(r.infos[info.ID], info)
	return Audit{Dead: info.ID}, r.opts
}

func (r *cancelRecorder) asked(id int64) []litequeue.JobInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.infos[id]
}

// audits returns the job ids named by the stored Audit jobs, sorted.
func audits(t *testing.T, q *litequeue.Queue) []int64 {
	t.Helper()
	js, err := q.Jobs(context.Background(), litequeue.JobFilter{Kind: Audit{}.Kind()})
	require.NoError(t, err)
	var out []int64
	for _, j := range js {
		var a Audit
		require.NoError(t, json.Unmarshal(j.Payload, &a))
		out = append(out, a.Dead)
	}
	sort.Slice(out, func(i, k int) bool { return out[i] < out[k] })
	return out
}

func testOnCancel(t *testing.T, b conformanceBackend) {
	var rec cancelRecorder
	cfg := queue(litequeue.NoRetry())
	cfg.OnCancel = rec.hook
	h := setup(t, b, queues(cfg))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	h.start(t)
	ctx := context.Background()
	running, err := h.Q.Enqueue(ctx, Email{To: "run"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, running, 1)
	require.NoError(t, h.Q.Pause(ctx, litequeue.DefaultQueue))
	pending, err := h.Q.Enqueue(ctx, Email{To: "pending"}, &litequeue.EnqueueOptions{Key: "p", Priority: 3})
	require.NoError(t, err)
	scheduled, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)

	n, err := h.Q.Cancel(ctx, pending, scheduled, running)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []int64{running, pending, scheduled}, audits(t, h.Q), "one follow-up per cancelled job, committed with the cancel")
	h.Ev.Wait(t, litequeue.EventCancelled, running, 1)

	info := rec.asked(pending)
	require.Len(t, info, 1)
	require.Equal(t, litequeue.StateCancelled, info[0].State)
	require.Equal(t, "p", info[0].Key)
	require.Equal(t, 3, info[0].Priority)
	require.JSONEq(t, `{"to":"pending"}`, string(info[0].Payload))
	require.True(t, info[0].FinishedAt.Equal(h.Clock.Now()))
	require.Equal(t, 1, rec.asked(running)[0].Attempt, "the running job's attempt")

	// Each follow-up is reported enqueued, after its job's EventCancelled
	// when that is reported at once.
	js, err := h.Q.Jobs(ctx, litequeue.JobFilter{Kind: Audit{}.Kind()})
	require.NoError(t, err)
	for _, j := range js {
		h.Ev.Wait(t, litequeue.EventEnqueued, j.ID, 1)
	}
	h.flush(t)
	require.Less(t, h.Ev.index(litequeue.EventCancelled, pending), h.Ev.index(litequeue.EventEnqueued, js[len(js)-1].ID))

	// A job is cancelled once: a second cancel is refused and asks nothing.
	_, err = h.Q.Cancel(ctx, pending)
	require.ErrorIs(t, err, litequeue.ErrWrongState)
	require.Len(t, rec.asked(pending), 1)
	require.Len(t, audits(t, h.Q), 3)
}

func testOnCancelBulk(t *testing.T, b conformanceBackend) {
	var rec cancelRecorder
	cfg := queue(litequeue.NoRetry())
	cfg.OnCancel = rec.hook
	h := setup(t, b, queues(cfg))
	ctx := context.Background()
	var ids []int64
	for i := range 3 {
		id, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Delay: time.Duration(i) * time.Minute})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	n, err := h.Q.CancelJobs(ctx, litequeue.JobQuery{Kinds: []string{Email{}.Kind()}})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, ids, audits(t, h.Q))
	for _, id := range ids {
		h.Ev.Wait(t, litequeue.EventCancelled, id, 1)
		require.Len(t, rec.asked(id), 1)
	}
	h.flush(t)
	require.Equal(t, 3, h.Ev.Count(litequeue.EventCancelled, 0), "one EventCancelled per job")
	require.Equal(t, 6, h.Ev.Count(litequeue.EventEnqueued, 0), "three jobs, three follow-ups")
	n, err = h.Q.CancelJobs(ctx, litequeue.JobQuery{})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the unhandled follow-ups are pending jobs too")
	require.Len(t, audits(t, h.Q), 6, "each follow-up cancelled asked for its own follow-up")
}

func testOnCancelAllOrNothing(t *testing.T, b conformanceBackend) {
	var rec cancelRecorder
	cfg := queue(litequeue.NoRetry())
	cfg.OnCancel = rec.hook
	h := setup(t, b, queues(cfg))
	ctx := context.Background()
	pending, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, pending, pending+1000)
	require.ErrorIs(t, err, litequeue.ErrNotFound)
	require.Empty(t, audits(t, h.Q), "no follow-up without the cancel")
	j, err := h.Q.Job(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
}

func testOnCancelSkipped(t *testing.T, b conformanceBackend) {
	var rec cancelRecorder
	rec.opts = &litequeue.EnqueueOptions{Key: "one-audit"}
	cfg := queue(litequeue.NoRetry())
	cfg.OnCancel = rec.hook
	other := litequeue.QueueConfig{Name: "other", Retry: litequeue.NoRetry(),
		OnCancel: func(litequeue.JobInfo) (litequeue.Job, *litequeue.EnqueueOptions) {
			return Audit{}, &litequeue.EnqueueOptions{Delay: -time.Second} // invalid
		}}
	h := setup(t, b, queues(cfg, other))
	ctx := context.Background()
	a, err := h.Q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err)
	c, err := h.Q.Enqueue(ctx, Email{To: "c"}, nil)
	require.NoError(t, err)
	o, err := h.Q.Enqueue(ctx, Email{To: "o"}, &litequeue.EnqueueOptions{Queue: "other"})
	require.NoError(t, err)
	n, err := h.Q.Cancel(ctx, a, c, o)
	require.NoError(t, err)
	require.Equal(t, 3, n, "every job is cancelled")
	require.Len(t, audits(t, h.Q), 1, "the second follow-up's key is held; the invalid one is left out")
	j, err := h.Q.Job(ctx, o)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, j.State)
}
