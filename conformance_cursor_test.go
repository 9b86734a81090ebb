package litequeue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"CursorPagesConcatenateToTheFullListing", testCursorPages},
		{"CursorPagesRepeatNothingUnderInserts", testCursorInserts},
		{"BadCursorIsRefused", testBadCursor},
	}...)
}

// cursorJobs enqueues n jobs of two kinds over two queues, three priorities and due
// times past and future (several sharing one), cancels every seventh, and
// returns their ids.
func cursorJobs(t *testing.T, h *Harness, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	now := h.Clock.Now()
	var ids []int64
	for i := range n {
		queue := "alpha"
		if i%3 == 0 {
			queue = "beta"
		}
		due := now.Add(time.Duration(i%5-2) * time.Minute) // ties on purpose
		var job litequeue.Job = Email{To: "x"}
		if i%4 == 0 {
			job = Audit{Dead: int64(i)}
		}
		id, err := h.Q.Enqueue(ctx, job, &litequeue.EnqueueOptions{Queue: queue, Priority: i%3 - 1, RunAt: due})
		require.NoError(t, err)
		ids = append(ids, id)
		if i%7 == 0 {
			_, err := h.Q.Cancel(ctx, id)
			require.NoError(t, err)
		}
	}
	return ids
}

// pageAll reads f's listing page by page of size by cursor; between two
// pages it calls between (if non-nil).
func pageAll(t *testing.T, q *litequeue.Queue, f litequeue.JobFilter, size int, between func()) []litequeue.JobInfo {
	t.Helper()
	f.Limit = size
	var all []litequeue.JobInfo
	for range 1000 {
		page, err := q.Jobs(context.Background(), f)
		require.NoError(t, err)
		all = append(all, page...)
		if len(page) < size {
			return all
		}
		f.After = page[len(page)-1].Cursor(f.Order)
		if between != nil {
			between()
		}
	}
	t.Fatal("paging never ended")
	return nil
}

func ids(jobs []litequeue.JobInfo) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func testCursorPages(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	cursorJobs(t, h, 45)
	live := []litequeue.State{litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning}
	for _, f := range []litequeue.JobFilter{
		{},
		{Order: litequeue.OrderNextDue},
		{Order: litequeue.OrderNextDue, States: live},
		{Order: litequeue.OrderNextDue, States: []litequeue.State{litequeue.StateScheduled}},
		{Order: litequeue.OrderNextDue, States: live, Queue: "alpha"},
		{Queue: "beta", States: []litequeue.State{litequeue.StateReady, litequeue.StateCancelled}},
		{Order: litequeue.OrderNextDue, States: live, Kind: Email{}.Kind(), Offset: 2},
	} {
		full, err := h.Q.Jobs(context.Background(), litequeue.JobFilter{Queue: f.Queue, Kind: f.Kind, States: f.States, Order: f.Order})
		require.NoError(t, err)
		require.NotEmpty(t, full)
		for _, size := range []int{3, 10} {
			got := pageAll(t, h.Q, f, size, nil)
			want := full
			if f.Offset > 0 {
				// Each page skips Offset after its cursor.
				want = nil
				for i := f.Offset; i < len(full); i += size + f.Offset {
					want = append(want, full[i:min(i+size, len(full))]...)
				}
			}
			require.Equal(t, ids(want), ids(got), "filter %+v, pages of %d", f, size)
		}
	}
}

func testCursorInserts(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	before := cursorJobs(t, h, 40)
	live := []litequeue.State{litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning}
	for _, f := range []litequeue.JobFilter{{}, {Order: litequeue.OrderNextDue, States: live}, {Order: litequeue.OrderNextDue}} {
		full, err := h.Q.Jobs(context.Background(), f)
		require.NoError(t, err)
		n := 0
		insert := func() {
			// Before the page, after it and at its place in next-due order.
			for _, d := range []time.Duration{-time.Hour, 0, time.Hour} {
				_, err := h.Q.Enqueue(context.Background(), Email{To: "new"}, &litequeue.EnqueueOptions{Queue: "alpha", RunAt: h.Clock.Now().Add(d), Priority: n % 3})
				require.NoError(t, err)
				n++
			}
		}
		got := pageAll(t, h.Q, f, 6, insert)
		seen := map[int64]bool{}
		for _, j := range got {
			require.False(t, seen[j.ID], "job %d listed twice (filter %+v)", j.ID, f)
			seen[j.ID] = true
		}
		for _, j := range full {
			require.True(t, seen[j.ID], "job %d of the listing before the inserts never listed (filter %+v)", j.ID, f)
		}
	}
	require.NotEmpty(t, before)
}

func testBadCursor(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ids := cursorJobs(t, h, 3)
	ctx := context.Background()
	for _, f := range []litequeue.JobFilter{
		{After: "x"},
		{After: "1:0:2"},
		{After: "-"},
		{Order: litequeue.OrderNextDue, After: "12"},
		{Order: litequeue.OrderNextDue, After: "1:a:2"},
		{Order: litequeue.OrderNextDue, After: "1:99999999999:2"},
	} {
		_, err := h.Q.Jobs(ctx, f)
		require.True(t, errors.Is(err, litequeue.ErrBadCursor), "After %q, order %q: %v", f.After, f.Order, err)
		_, err = h.Q.DeadLetters(ctx, f)
		require.True(t, errors.Is(err, litequeue.ErrBadCursor), "dead letters, After %q: %v", f.After, err)
	}
	// A cursor of a job that no longer exists still places the page.
	got, err := h.Q.Jobs(ctx, litequeue.JobFilter{After: "999999"})
	require.NoError(t, err)
	require.Len(t, got, len(ids))
}
