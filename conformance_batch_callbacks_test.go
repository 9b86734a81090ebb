package litequeue_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Batches with callbacks (batch_callbacks.go).

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"BatchCallbacksRunOnceWithTheCountsAndFailedIDs", testBatchCallbacks},
		{"BatchEmptyIsRefusedWithNothingWritten", testBatchEmpty},
	}...)
}

// Member is a batch member; Fail makes it die at once.
type Member struct {
	Fail bool `json:"fail"`
}

func (Member) Kind() string { return "conformance_member" }

// Callback is a batch callback.
type Callback struct {
	Name string `json:"name"`
}

func (Callback) Kind() string { return "conformance_callback" }

func testBatchCallbacks(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	var mu sync.Mutex
	calls := map[string][]litequeue.BatchSummary{}
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Member]) error {
		if d.Job.Fail {
			return litequeue.Permanent(errors.New("member fails"))
		}
		return nil
	})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Callback]) error {
		s, err := d.BatchSummary(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		calls[d.Job.Name] = append(calls[d.Job.Name], s)
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	cb := func(name string) litequeue.BatchCallbacks {
		return litequeue.BatchCallbacks{OnSuccess: &litequeue.BatchItem{Job: Callback{Name: name + "-success"}},
			OnComplete: &litequeue.BatchItem{Job: Callback{Name: name + "-complete"}}}
	}
	good, err := h.Q.EnqueueBatchWithCallbacks(ctx, []litequeue.BatchItem{{Job: Member{}}, {Job: Member{}}, {Job: Member{}}}, cb("good"))
	require.NoError(t, err)
	bad, err := h.Q.EnqueueBatchWithCallbacks(ctx, []litequeue.BatchItem{{Job: Member{}}, {Job: Member{Fail: true}}, {Job: Member{}}}, cb("bad"))
	require.NoError(t, err)
	require.Len(t, good.Members, 3)
	require.Equal(t, litequeue.StateWaiting, jobState(t, h.Q, good.OnSuccess).State)
	h.start(t)
	for _, id := range []int64{good.OnSuccess, good.OnComplete, bad.OnComplete} {
		h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	}
	waitFor(t, "the failed batch's success callback is cancelled", func() bool {
		return jobState(t, h.Q, bad.OnSuccess).State == litequeue.StateCancelled
	})
	require.Contains(t, jobState(t, h.Q, bad.OnSuccess).DeadReason, "died")
	h.flush(t)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []litequeue.BatchSummary{{Members: 3, Succeeded: 3}}, calls["good-success"])
	require.Equal(t, []litequeue.BatchSummary{{Members: 3, Succeeded: 3}}, calls["good-complete"])
	require.Equal(t, []litequeue.BatchSummary{{Members: 3, Succeeded: 2, Failed: 1, FailedIDs: []int64{bad.Members[1]}}}, calls["bad-complete"])
	require.Empty(t, calls["bad-success"])
}

func testBatchEmpty(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	_, err := h.Q.EnqueueBatchWithCallbacks(ctx, nil, litequeue.BatchCallbacks{OnComplete: &litequeue.BatchItem{Job: Callback{}}})
	require.ErrorIs(t, err, litequeue.ErrInvalidWorkflow)
	require.ErrorContains(t, err, "empty batch")
	js, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, js)
}
