package litequeue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// deadFixture enqueues n jobs of kind send_email whose handler fails with
// msg(i) and waits until they are all dead letters; it returns their ids.
func deadFixture(t *testing.T, h *harness, n int, msg func(i int) string) []int64 {
	t.Helper()
	ctx := context.Background()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		var i int
		fmt.Sscanf(d.Job.To, "dead-%d", &i)
		return errors.New(msg(i))
	})
	var ids []int64
	for i := range n {
		id, err := h.q.Enqueue(ctx, SendEmail{To: fmt.Sprintf("dead-%d", i)}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	h.start(t)
	h.ev.wait(t, EventDead, 0, n)
	require.NoError(t, h.q.Stop(ctx))
	return ids
}

func TestSearchJobsPagesNewestFirstByKeyset(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	var ids []int64
	for i := range 7 {
		id, err := h.q.Enqueue(ctx, SendEmail{To: fmt.Sprintf("p%d", i)}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	var got []int64
	var pages int
	p := PageRequest{Limit: 3}
	for {
		page, err := h.q.SearchJobs(ctx, JobQuery{}, p)
		require.NoError(t, err)
		pages++
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.Next == 0 {
			break
		}
		p.Before = page.Next
	}
	require.Equal(t, 3, pages)
	require.Equal(t, []int64{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}, got)
}

func TestSearchJobsFiltersByQueueKindStateAndText(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	dead := deadFixture(t, h, 2, func(i int) string { return fmt.Sprintf("SMTP refused %d", i) })
	ready, err := h.q.Enqueue(ctx, SendEmail{To: "Alice@example.com"}, nil)
	require.NoError(t, err)
	sched, err := h.q.Enqueue(ctx, SendEmail{To: "bob"}, &EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	media, err := h.q.Enqueue(ctx, Resize{N: 3}, nil)
	require.NoError(t, err)

	search := func(f JobQuery) []int64 {
		t.Helper()
		page, err := h.q.SearchJobs(ctx, f, PageRequest{})
		require.NoError(t, err)
		var out []int64
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	require.Equal(t, []int64{media}, search(JobQuery{Queue: "media"}))
	require.Equal(t, []int64{media}, search(JobQuery{Kind: "resize"}))
	require.Equal(t, []int64{sched}, search(JobQuery{States: []State{StateScheduled}}))
	require.Equal(t, []int64{media, ready}, search(JobQuery{States: []State{StateReady}}))
	require.Equal(t, []int64{dead[1], dead[0]}, search(JobQuery{States: []State{StateDead}}))
	require.Equal(t, []int64{ready}, search(JobQuery{Text: "alice@EXAMPLE"}), "payload text, any case")
	require.Equal(t, []int64{dead[1]}, search(JobQuery{Text: "smtp refused 1"}), "last error text")
	require.Equal(t, []int64{sched}, search(JobQuery{IDs: []int64{sched, 99999}}))
	_, err = h.q.SearchJobs(ctx, JobQuery{States: []State{"lost"}}, PageRequest{})
	require.ErrorContains(t, err, "unknown state")
}

func TestSearchJobsStopsAtItsScanWindow(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	target, err := h.q.Enqueue(ctx, SendEmail{To: "needle"}, nil)
	require.NoError(t, err)
	for i := range 20 {
		_, err := h.q.Enqueue(ctx, SendEmail{To: fmt.Sprintf("hay%d", i)}, nil)
		require.NoError(t, err)
	}
	page, err := h.q.SearchJobs(ctx, JobQuery{Text: "needle"}, PageRequest{ScanLimit: 8})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	require.True(t, page.Partial)
	require.Equal(t, page.ScannedFrom, page.Next)
	require.Equal(t, int64(8), page.ScannedTo-page.ScannedFrom+1, "one window of 8 ids")
	var found []JobInfo
	for page.Next != 0 {
		page, err = h.q.SearchJobs(ctx, JobQuery{Text: "needle"}, PageRequest{ScanLimit: 8, Before: page.Next})
		require.NoError(t, err)
		found = append(found, page.Jobs...)
	}
	require.Len(t, found, 1)
	require.Equal(t, target, found[0].ID)
}

func TestCountJobsCountsUpToItsLimit(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	for i := range 5 {
		_, err := h.q.Enqueue(ctx, SendEmail{To: fmt.Sprint(i)}, nil)
		require.NoError(t, err)
	}
	n, err := h.q.CountJobs(ctx, JobQuery{States: []State{StateReady}}, 0)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	n, err = h.q.CountJobs(ctx, JobQuery{}, 3)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = h.q.CountJobs(ctx, JobQuery{States: []State{StateDead}}, 0)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestQueueSummariesMatchStats(t *testing.T) {
	h := setup(t, func(o *Options) { o.CompletedRetention = time.Hour })
	ctx := context.Background()
	deadFixture(t, h, 3, func(i int) string { return "boom" })
	_, err := h.q.Enqueue(ctx, SendEmail{To: "later"}, &EnqueueOptions{Delay: time.Minute})
	require.NoError(t, err)
	first, err := h.q.Enqueue(ctx, SendEmail{To: "now"}, &EnqueueOptions{Priority: 5})
	require.NoError(t, err)
	h.clock.Add(2 * time.Second)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "now2"}, nil)
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, Resize{N: 1}, nil)
	require.NoError(t, err)
	h.clock.Add(3 * time.Second)

	stats, err := h.q.Stats(ctx)
	require.NoError(t, err)
	sums, err := h.q.QueueSummaries(ctx, 0)
	require.NoError(t, err)
	require.Len(t, sums, len(stats))
	for i, s := range stats {
		got := sums[i]
		require.Equal(t, QueueSummary{Queue: s.Queue, Ready: s.Ready, Scheduled: s.Scheduled, Running: s.Running,
			Completed: s.Completed, Dead: s.Dead, OldestReady: s.OldestReady, OldestReadyID: got.OldestReadyID}, got)
	}
	require.Equal(t, first, sums[0].OldestReadyID, "the oldest ready job is found across priority levels")
	require.Equal(t, 5*time.Second, sums[0].OldestReady)

	capped, err := h.q.QueueSummaries(ctx, 2)
	require.NoError(t, err)
	require.True(t, capped[0].Capped)
	require.Equal(t, 2, capped[0].Ready+capped[0].Scheduled+capped[0].Running)
	require.True(t, capped[0].DeadCapped, "3 dead letters, limit 2")
	require.Equal(t, 2, capped[0].Dead)
	require.False(t, sums[0].DeadCapped)
}

func TestBulkActionsTouchOnlyTheirStates(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	dead := deadFixture(t, h, 3, func(i int) string { return "x" })
	ready, err := h.q.Enqueue(ctx, SendEmail{To: "r"}, nil)
	require.NoError(t, err)
	sched, err := h.q.Enqueue(ctx, SendEmail{To: "s"}, &EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)

	n, err := h.q.CancelMatching(ctx, JobQuery{States: []State{StateScheduled, StateDead}})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the scheduled job is cancelled; dead letters are not pending")
	j, err := h.q.Job(ctx, sched)
	require.NoError(t, err)
	require.Equal(t, StateCancelled, j.State, "cancelled jobs are kept")

	n, err = h.q.RequeueMatching(ctx, JobQuery{IDs: []int64{dead[0], ready}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err = h.q.Job(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, StateReady, j.State)
	require.Equal(t, 1, h.ev.count(EventRequeued, dead[0]))

	n, err = h.q.DeleteMatching(ctx, JobQuery{})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the two remaining dead letters and the cancelled job; live jobs stay")
	left, err := h.q.CountJobs(ctx, JobQuery{}, 0)
	require.NoError(t, err)
	require.Equal(t, 2, left)
}

func TestBulkActionsWorkInChunks(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	items := make([]BatchItem, bulkChunk*2+7)
	for i := range items {
		items[i] = BatchItem{Job: SendEmail{To: fmt.Sprint(i)}}
	}
	_, err := h.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	n, err := h.q.CancelMatching(ctx, JobQuery{Kind: "send_email"})
	require.NoError(t, err)
	require.Equal(t, len(items), n)
	left, err := h.q.CountJobs(ctx, JobQuery{States: []State{StateReady, StateScheduled}}, 0)
	require.NoError(t, err)
	require.Zero(t, left)
	n, err = h.q.DeleteMatching(ctx, JobQuery{States: []State{StateCancelled}})
	require.NoError(t, err)
	require.Equal(t, len(items), n, "cancelled jobs are deleted by DeleteMatching")
}

func TestBulkActionsRefuseReadOnly(t *testing.T) {
	h := setup(t, nil)
	ro, err := Open(h.path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.CancelMatching(context.Background(), JobQuery{})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = ro.RequeueDeadGroup(context.Background(), "x", DeadGroupQuery{})
	require.ErrorIs(t, err, ErrReadOnly)
}

func TestNormalizeErrorGroupsMessagesThatDifferInDetails(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"job 42: timeout after 3s", "job 7: timeout after 15s"},
		{`open "a.txt": not found`, `open "b/c.txt": not found`},
		{"user 0b7e2c1a-2f3d-4c5e-8a9b-1c2d3e4f5a6b missing", "user 11111111-2222-3333-4444-555555555555 missing"},
		{"dial tcp 10.0.0.1:5432: refused\nstack...", "dial tcp 10.0.0.2:5433:   refused"},
	} {
		require.Equal(t, NormalizeError(tc.a), NormalizeError(tc.b), "%q vs %q", tc.a, tc.b)
	}
	require.NotEqual(t, NormalizeError("smtp down"), NormalizeError("smtp refused"))
	require.Equal(t, "(no error message)", NormalizeError(""))
	long := NormalizeError(strings.Repeat("é", 300))
	require.LessOrEqual(t, len(long), maxGroupKeyLen+len("…"))
	require.True(t, strings.HasSuffix(long, "…"))
}

func TestDeadLetterGroupsAndRequeueGroup(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	ids := deadFixture(t, h, 6, func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf("payment %d declined", i)
		}
		return fmt.Sprintf("timeout after %dms", i*10)
	})
	groups, err := h.q.DeadLetterGroups(ctx, DeadGroupQuery{})
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, "timeout after <n>ms", groups[0].Key)
	require.Equal(t, 4, groups[0].Count)
	require.Equal(t, "payment <n> declined", groups[1].Key)
	require.Equal(t, 2, groups[1].Count)
	require.Equal(t, ids[3], groups[1].SampleID, "the newest of the group")
	require.Equal(t, "payment 3 declined", groups[1].SampleError)
	require.Equal(t, []string{DefaultQueue}, groups[1].Queues)
	require.False(t, groups[1].FirstSeen.After(groups[1].LastSeen))

	n, err := h.q.RequeueDeadGroup(ctx, groups[1].Key, DeadGroupQuery{})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range []int64{ids[0], ids[3]} {
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, StateReady, j.State)
	}
	groups, err = h.q.DeadLetterGroups(ctx, DeadGroupQuery{})
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, 4, groups[0].Count)
}
