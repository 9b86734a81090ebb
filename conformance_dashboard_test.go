package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/litequeuetest"
)

// The dashboard's reads, bulk actions, dead-letter groups, the per-minute
// history and the test kit's Work through a queue (store.Dashboard, store.Testing),
// through the public API.
func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"SearchJobsPagesByKeysetAndFilters", testSearchJobs},
		{"SearchJobsStopsAtItsScanWindowAndCountJobsAtItsLimit", testSearchWindow},
		{"QueueSummariesMatchStatsAndCap", testSummaries},
		{"QueueSummariesBoundTheOldestReadySearchByPriorityLevels", testSummariesPriorityLevels},
		{"BulkActionsTouchOnlyTheirStatesInChunks", testBulk},
		{"JobQuerySelectsByKindsAndTimeBounds", testJobQueryBounds},
		{"DeadLetterGroupsAndRequeueGroup", testDeadGroups},
		{"DeadLetterGroupsReadTheStartOfEachMessageAndBoundTheGroups", testDeadGroupsBounded},
		{"HistoryCountsOutcomesPerMinutePersistsAndPrunes", testHistory},
		{"WorkThroughAQueueStoresTheAttemptAndItsOutcome", testWorkThrough},
	}...)
}

// buryAll enqueues one job per message on a queue whose handler fails with
// the job's To, without retries, and waits until all are dead; it returns
// their ids. The queue is stopped afterwards.
func buryAll(t *testing.T, h *Harness, msgs ...string) []int64 {
	t.Helper()
	ctx := context.Background()
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New(d.Job.To)
	})
	var ids []int64
	for _, m := range msgs {
		id, err := h.Q.Enqueue(ctx, Email{To: m}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	h.start(t)
	for _, id := range ids {
		h.Ev.Wait(t, litequeue.EventDead, id, 1)
	}
	require.NoError(t, h.Q.Stop(ctx))
	return ids
}

func pageIDs(p litequeue.JobPage) []int64 {
	var out []int64
	for _, j := range p.Jobs {
		out = append(out, j.ID)
	}
	return out
}

func testSearchJobs(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	dead := buryAll(t, h, "SMTP refused 1", "SMTP refused 2")
	var ids []int64
	for i := range 5 {
		id, err := h.Q.Enqueue(ctx, Email{To: fmt.Sprintf("p%d", i)}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	alice, err := h.Q.Enqueue(ctx, Email{To: "Alice@example.com"}, &litequeue.EnqueueOptions{Queue: "mail"})
	require.NoError(t, err)
	sched, err := h.Q.Enqueue(ctx, Email{To: "bob"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)

	// Every job, newest first, three to a page.
	want := []int64{sched, alice, ids[4], ids[3], ids[2], ids[1], ids[0], dead[1], dead[0]}
	var got []int64
	p := litequeue.PageRequest{Limit: 3}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging ends")
		page, err := h.Q.SearchJobs(ctx, litequeue.JobQuery{}, p)
		require.NoError(t, err)
		require.False(t, page.Partial)
		got = append(got, pageIDs(page)...)
		if page.Next == 0 {
			break
		}
		p.Before = page.Next
	}
	require.Equal(t, want, got)

	search := func(f litequeue.JobQuery) []int64 {
		t.Helper()
		page, err := h.Q.SearchJobs(ctx, f, litequeue.PageRequest{})
		require.NoError(t, err)
		return pageIDs(page)
	}
	require.Equal(t, []int64{alice}, search(litequeue.JobQuery{Queue: "mail"}))
	require.Equal(t, []int64{sched}, search(litequeue.JobQuery{States: []litequeue.State{litequeue.StateScheduled}}))
	require.Equal(t, []int64{dead[1], dead[0]}, search(litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}))
	require.Equal(t, []int64{alice}, search(litequeue.JobQuery{Text: "ALICE@"}), "text in the payload, ignoring case")
	require.Equal(t, []int64{dead[1]}, search(litequeue.JobQuery{Text: "smtp refused 2"}), "text in the last error")
	require.Equal(t, []int64{ids[3], ids[1]}, search(litequeue.JobQuery{IDs: []int64{ids[1], ids[3], 999999}}))
	require.Empty(t, search(litequeue.JobQuery{Kind: "other_kind"}))
	page, err := h.Q.SearchJobs(ctx, litequeue.JobQuery{}, litequeue.PageRequest{Before: ids[0]})
	require.NoError(t, err)
	require.Equal(t, []int64{dead[1], dead[0]}, pageIDs(page))
	require.Zero(t, page.Next)
	_, err = h.Q.SearchJobs(ctx, litequeue.JobQuery{States: []litequeue.State{"bogus"}}, litequeue.PageRequest{})
	require.Error(t, err)

	// The jobs read back as the public view, states told at the clock's now.
	page, err = h.Q.SearchJobs(ctx, litequeue.JobQuery{IDs: []int64{sched, dead[0]}}, litequeue.PageRequest{})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 2)
	require.Equal(t, litequeue.StateScheduled, page.Jobs[0].State)
	require.Equal(t, litequeue.StateDead, page.Jobs[1].State)
	require.Equal(t, "SMTP refused 1", page.Jobs[1].LastError)
	require.JSONEq(t, `{"to":"bob"}`, string(page.Jobs[0].Payload))
	h.Clock.Add(2 * time.Hour)
	require.Equal(t, []int64{sched, ids[4], ids[3], ids[2], ids[1], ids[0]},
		search(litequeue.JobQuery{Queue: litequeue.DefaultQueue, States: []litequeue.State{litequeue.StateReady}}))
}

func testSearchWindow(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	target, err := h.Q.Enqueue(ctx, Email{To: "needle"}, nil)
	require.NoError(t, err)
	for i := range 20 {
		_, err := h.Q.Enqueue(ctx, Email{To: fmt.Sprintf("hay%d", i)}, nil)
		require.NoError(t, err)
	}
	page, err := h.Q.SearchJobs(ctx, litequeue.JobQuery{Text: "needle"}, litequeue.PageRequest{ScanLimit: 8})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	require.True(t, page.Partial)
	require.Equal(t, page.ScannedFrom, page.Next)
	require.Equal(t, int64(8), page.ScannedTo-page.ScannedFrom+1, "one window of 8 ids")
	var found []int64
	for pages := 0; page.Next != 0; pages++ {
		require.Less(t, pages, 10)
		page, err = h.Q.SearchJobs(ctx, litequeue.JobQuery{Text: "needle"}, litequeue.PageRequest{ScanLimit: 8, Before: page.Next})
		require.NoError(t, err)
		found = append(found, pageIDs(page)...)
	}
	require.Equal(t, []int64{target}, found)

	n, err := h.Q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateReady}}, 0)
	require.NoError(t, err)
	require.Equal(t, 21, n)
	n, err = h.Q.CountJobs(ctx, litequeue.JobQuery{}, 5)
	require.NoError(t, err)
	require.Equal(t, 5, n, "stops at the limit")
	n, err = h.Q.CountJobs(ctx, litequeue.JobQuery{Text: "HAY1"}, 0)
	require.NoError(t, err)
	require.Equal(t, 11, n, "hay1 and hay10-hay19")
	n, err = h.Q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.NoError(t, err)
	require.Zero(t, n)
}

func testSummaries(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) {
		o.CompletedRetention = time.Hour
		o.Queues = []litequeue.QueueConfig{queue(litequeue.NoRetry())}
	})
	ctx := context.Background()
	buryAll(t, h, "boom", "boom", "boom")
	_, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Minute})
	require.NoError(t, err)
	first, err := h.Q.Enqueue(ctx, Email{To: "now"}, &litequeue.EnqueueOptions{Priority: 5})
	require.NoError(t, err)
	h.Clock.Add(2 * time.Second)
	_, err = h.Q.Enqueue(ctx, Email{To: "now2"}, nil)
	require.NoError(t, err)
	_, err = h.Q.Enqueue(ctx, Email{To: "elsewhere"}, &litequeue.EnqueueOptions{Queue: "zeta"})
	require.NoError(t, err)
	h.Clock.Add(3 * time.Second)

	stats, err := h.Q.Stats(ctx)
	require.NoError(t, err)
	sums, err := h.Q.QueueSummaries(ctx, 0)
	require.NoError(t, err)
	require.Len(t, sums, len(stats))
	for i, s := range stats {
		got := sums[i]
		require.Equal(t, litequeue.QueueSummary{Queue: s.Queue, Ready: s.Ready, Scheduled: s.Scheduled, Running: s.Running,
			Completed: s.Completed, Dead: s.Dead, OldestReady: s.OldestReady, OldestReadyID: got.OldestReadyID}, got)
	}
	require.Equal(t, litequeue.DefaultQueue, sums[0].Queue)
	require.Equal(t, first, sums[0].OldestReadyID, "the oldest ready job is found across priority levels")
	require.Equal(t, 5*time.Second, sums[0].OldestReady)
	require.Equal(t, 3, sums[0].Dead)

	capped, err := h.Q.QueueSummaries(ctx, 2)
	require.NoError(t, err)
	require.True(t, capped[0].Capped)
	require.Equal(t, 2, capped[0].Ready+capped[0].Scheduled+capped[0].Running)
	require.True(t, capped[0].DeadCapped, "3 dead letters, limit 2")
	require.Equal(t, 2, capped[0].Dead)
	require.False(t, capped[1].Capped, "queue zeta has one live job")
	require.False(t, sums[0].DeadCapped)
}

// The oldest ready job is found among the live jobs counted when the count
// did not stop at its limit, whatever their priorities; when it stopped,
// only the 100 most urgent priority levels are searched, and the answer
// says it is an "at least" figure.
func testSummariesPriorityLevels(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	oldest, err := h.Q.Enqueue(ctx, Email{To: "oldest"}, &litequeue.EnqueueOptions{Priority: 149})
	require.NoError(t, err)
	h.Clock.Add(time.Minute)
	items := make([]litequeue.BatchItem, 149)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Email{To: fmt.Sprint(i)}, Options: &litequeue.EnqueueOptions{Priority: i}}
	}
	_, err = h.Q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	h.Clock.Add(time.Second)

	sums, err := h.Q.QueueSummaries(ctx, 1000)
	require.NoError(t, err)
	require.Len(t, sums, 1)
	require.Equal(t, 150, sums[0].Ready)
	require.Equal(t, oldest, sums[0].OldestReadyID, "every live job was counted: the oldest is found at any priority")
	require.Equal(t, 61*time.Second, sums[0].OldestReady)
	require.False(t, sums[0].OldestReadyCapped)

	sums, err = h.Q.QueueSummaries(ctx, 10)
	require.NoError(t, err)
	require.True(t, sums[0].Capped)
	require.True(t, sums[0].OldestReadyCapped, "150 priority levels: only the 100 most urgent are searched")
	require.NotEqual(t, oldest, sums[0].OldestReadyID)
	require.Equal(t, time.Second, sums[0].OldestReady, "the oldest of the levels searched")
	j, err := h.Q.Job(ctx, sums[0].OldestReadyID)
	require.NoError(t, err)
	require.Less(t, j.Priority, 100)
}

func testBulk(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	dead := buryAll(t, h, "x", "x", "x")
	ready, err := h.Q.Enqueue(ctx, Email{To: "r"}, nil)
	require.NoError(t, err)
	sched, err := h.Q.Enqueue(ctx, Email{To: "s"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)

	n, err := h.Q.CancelMatching(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateScheduled, litequeue.StateDead}})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the scheduled job is cancelled; dead letters are not pending")
	require.Equal(t, litequeue.StateCancelled, state(t, h.Q, sched), "cancelled jobs are kept")

	n, err = h.Q.RequeueMatching(ctx, litequeue.JobQuery{IDs: []int64{dead[0], ready}})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the dead letter moves")
	j, err := h.Q.Job(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	require.Zero(t, j.Attempt)
	h.flush(t)
	require.Equal(t, 1, h.Ev.Count(litequeue.EventRequeued, dead[0]))

	n, err = h.Q.DeleteMatching(ctx, litequeue.JobQuery{})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the two dead letters left and the cancelled job; live jobs stay")
	_, err = h.Q.Job(ctx, dead[1])
	require.ErrorIs(t, err, litequeue.ErrNotFound)
	for _, id := range []int64{dead[0], ready} {
		_, err = h.Q.Job(ctx, id)
		require.NoError(t, err)
	}

	// More jobs than one chunk of a bulk action.
	items := make([]litequeue.BatchItem, 1234)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Email{To: fmt.Sprintf("bulk%d", i)}, Options: &litequeue.EnqueueOptions{Queue: "bulk"}}
	}
	_, err = h.Q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	n, err = h.Q.CancelMatching(ctx, litequeue.JobQuery{Queue: "bulk"})
	require.NoError(t, err)
	require.Equal(t, 1234, n)
	c, err := h.Q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning}}, 0)
	require.NoError(t, err)
	require.Equal(t, 2, c)
	n, err = h.Q.DeleteMatching(ctx, litequeue.JobQuery{Queue: "bulk", States: []litequeue.State{litequeue.StateCancelled}})
	require.NoError(t, err)
	require.Equal(t, 1234, n, "cancelled jobs are deleted in chunks too")
}

func testDeadGroups(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	var msgs []string
	for i := range 6 {
		if i%3 == 0 {
			msgs = append(msgs, fmt.Sprintf("payment %d declined", i))
		} else {
			msgs = append(msgs, fmt.Sprintf("timeout after %dms", i*10))
		}
	}
	ids := buryAll(t, h, msgs...)
	groups, err := h.Q.DeadLetterGroups(ctx, litequeue.DeadGroupQuery{})
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, "timeout after <n>ms", groups[0].Key)
	require.Equal(t, 4, groups[0].Count)
	require.Equal(t, "payment <n> declined", groups[1].Key)
	require.Equal(t, 2, groups[1].Count)
	require.Equal(t, ids[3], groups[1].SampleID, "the newest of the group")
	require.Equal(t, "payment 3 declined", groups[1].SampleError)
	require.Equal(t, []string{litequeue.DefaultQueue}, groups[1].Queues)
	require.Equal(t, []string{Email{}.Kind()}, groups[1].Kinds)
	require.False(t, groups[1].FirstSeen.After(groups[1].LastSeen))

	limited, err := h.Q.DeadLetterGroups(ctx, litequeue.DeadGroupQuery{Limit: 1})
	require.NoError(t, err)
	require.Len(t, limited, 1, "only the latest dead letter is read")
	require.Equal(t, 1, limited[0].Count)
	none, err := h.Q.DeadLetterGroups(ctx, litequeue.DeadGroupQuery{Queue: "other"})
	require.NoError(t, err)
	require.Empty(t, none)

	n, err := h.Q.RequeueDeadGroup(ctx, groups[1].Key, litequeue.DeadGroupQuery{})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range []int64{ids[0], ids[3]} {
		j, err := h.Q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateReady, j.State)
	}
	groups, err = h.Q.DeadLetterGroups(ctx, litequeue.DeadGroupQuery{})
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, 4, groups[0].Count)
	n, err = h.Q.RequeueDeadGroup(ctx, "no such group", litequeue.DeadGroupQuery{})
	require.NoError(t, err)
	require.Zero(t, n)
}

// The grouping reads the first DeadMessagePrefix characters of a message,
// which give the whole message's key; past MaxGroups the smallest groups
// are counted together.
func testDeadGroupsBounded(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	long := "upstream said: " + strings.Repeat("é", 1100) // 1,115 characters, 2,215 bytes
	ids := buryAll(t, h, long, "a 1 failed", "b failed", "b failed", "c failed", "c failed", "c failed", "d failed")
	groups, err := h.Q.DeadLetterGroups(ctx, litequeue.DeadGroupQuery{MaxGroups: 3})
	require.NoError(t, err)
	require.Len(t, groups, 3)
	require.Equal(t, "c failed", groups[0].Key)
	require.Equal(t, "b failed", groups[1].Key)
	rest := groups[2]
	require.Equal(t, 3, rest.Merged, "the long message, a <n> failed and d failed")
	require.Equal(t, 3, rest.Count)
	require.Empty(t, rest.Key)
	require.Equal(t, ids[7], rest.SampleID, "the newest of the remainder")

	all, err := h.Q.DeadLetterGroups(ctx, litequeue.DeadGroupQuery{})
	require.NoError(t, err)
	require.Len(t, all, 5)
	var lg litequeue.DeadGroup
	for _, g := range all {
		if g.SampleID == ids[0] {
			lg = g
		}
	}
	require.Equal(t, litequeue.NormalizeError(long), lg.Key, "the start of the message gives the whole message's key")
	require.Equal(t, []rune(long)[:litequeue.DeadMessagePrefix], []rune(lg.SampleError), "the first DeadMessagePrefix characters")
	n, err := h.Q.RequeueDeadGroup(ctx, lg.Key, litequeue.DeadGroupQuery{})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err := h.Q.Job(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, long, j.LastError, "the job keeps its whole message")
}

func testHistory(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "fail" {
			return errors.New("no")
		}
		return nil
	})
	start := h.Clock.Now()
	h.start(t)
	id, err := h.Q.Enqueue(ctx, Email{To: "ok"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	h.Clock.Add(time.Minute)
	id, err = h.Q.Enqueue(ctx, Email{To: "fail"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventDead, id, 1)

	want := []litequeue.HistoryPoint{
		{Queue: litequeue.DefaultQueue, Minute: start, Enqueued: 1, Succeeded: 1},
		{Queue: litequeue.DefaultQueue, Minute: start.Add(time.Minute), Enqueued: 1, Dead: 1},
	}
	pts, err := h.Q.History(ctx, "", start)
	require.NoError(t, err)
	require.Equal(t, want, utcPoints(pts))
	require.NoError(t, h.Q.FlushHistory(ctx))
	require.NoError(t, h.Q.FlushHistory(ctx), "nothing left to write")
	require.NoError(t, h.Q.Stop(ctx))

	// Another queue on the same database reads what the first wrote.
	other := open(t, b, h.Addr, h.Clock.Now(), nil)
	pts, err = other.Q.History(ctx, litequeue.DefaultQueue, start)
	require.NoError(t, err)
	require.Equal(t, want, utcPoints(pts))
	pts, err = other.Q.History(ctx, "", start.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, want[1:], utcPoints(pts))
	pts, err = other.Q.History(ctx, "elsewhere", start)
	require.NoError(t, err)
	require.Empty(t, pts)

	// Counts written twice for one minute add up; rows older than the
	// retention are deleted when counts are written.
	_, err = other.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	require.NoError(t, other.Q.FlushHistory(ctx))
	pts, err = other.Q.History(ctx, "", start.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, pts[0].Enqueued)
	other.Clock.Add(litequeue.HistoryRetention + time.Hour)
	_, err = other.Q.Enqueue(ctx, Email{To: "y"}, nil)
	require.NoError(t, err)
	require.NoError(t, other.Q.FlushHistory(ctx))
	pts, err = other.Q.History(ctx, "", start.Add(-time.Hour))
	require.NoError(t, err)
	require.Len(t, pts, 1, "the week-old minutes were deleted")
	require.Equal(t, other.Clock.Now().Truncate(time.Minute).UTC(), pts[0].Minute.UTC())
}

func utcPoints(pts []litequeue.HistoryPoint) []litequeue.HistoryPoint {
	for i := range pts {
		pts[i].Minute = pts[i].Minute.UTC()
	}
	return pts
}

func testWorkThrough(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue,
		Retry: litequeue.RetryPolicy{MaxAttempts: 3, Backoff: litequeue.FixedBackoff(time.Minute)}}))
	ctx := context.Background()
	fail := func(ctx context.Context, d *litequeue.Delivery[Email]) error { return errors.New("down: " + d.Job.To) }
	ok := func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil }

	// A failure is stored as the worker stores it: a retry due after the
	// backoff, the attempt in the job's history.
	err := litequeuetest.Work(t, fail, Email{To: "a"}, litequeuetest.Through(h.Q), litequeuetest.LastError("before"))
	require.EqualError(t, err, "down: a")
	retry := h.Ev.Wait(t, litequeue.EventRetrying, 0, 1)
	j, err := h.Q.Job(ctx, retry.JobID)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateScheduled, j.State)
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, "down: a", j.LastError)
	require.True(t, j.VisibleAt.Equal(h.Clock.Now().Add(time.Minute)))
	require.Len(t, j.Attempts, 1)

	// The last attempt makes a dead letter.
	err = litequeuetest.Work(t, fail, Email{To: "b"}, litequeuetest.Through(h.Q), litequeuetest.Attempt(3))
	require.Error(t, err)
	dead := h.Ev.Wait(t, litequeue.EventDead, 0, 1)
	j, err = h.Q.Job(ctx, dead.JobID)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateDead, j.State)
	require.Equal(t, 3, j.Attempt)

	// A success completes (and so deletes) the job.
	require.NoError(t, litequeuetest.Work(t, ok, Email{To: "c"}, litequeuetest.Through(h.Q), litequeuetest.Key("k1")))
	done := h.Ev.Wait(t, litequeue.EventSucceeded, 0, 1)
	_, err = h.Q.Job(ctx, done.JobID)
	require.ErrorIs(t, err, litequeue.ErrNotFound)

	// A key held by a live job stores nothing.
	_, err = h.Q.Enqueue(ctx, Email{To: "d"}, &litequeue.EnqueueOptions{Key: "k2"})
	require.NoError(t, err)
	err = litequeuetest.Work(t, ok, Email{To: "e"}, litequeuetest.Through(h.Q), litequeuetest.Key("k2"))
	require.ErrorIs(t, err, litequeue.ErrDuplicate)

	// The test kit's load: the ready job "d" and the scheduled retry are
	// handled by h.Q's handler; a job of no handler is counted apart.
	litequeue.Register(h.Q, ok)
	_, err = h.Q.Enqueue(ctx, Audit{Dead: 1}, nil)
	require.NoError(t, err)
	l, err := kitlink.Of[*litequeue.Queue, *litequeue.Options]().Load(ctx, h.Q)
	require.NoError(t, err)
	require.Equal(t, kitlink.Load{Busy: 1, Next: j2time(t, h, retry.JobID), HasNext: true, Unhandled: 1}, l)
}

// j2time is the due time of job id.
func j2time(t *testing.T, h *Harness, id int64) time.Time {
	t.Helper()
	j, err := h.Q.Job(context.Background(), id)
	require.NoError(t, err)
	return j.VisibleAt
}

func testJobQueryBounds(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	ctx := context.Background()
	start := h.Clock.Now()
	first, err := h.Q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err)
	h.Clock.Add(time.Hour)
	mid := h.Clock.Now()
	second, err := h.Q.Enqueue(ctx, Email{To: "b"}, nil)
	require.NoError(t, err)

	page, err := h.Q.ListJobs(ctx, litequeue.JobQuery{CreatedFrom: mid}, litequeue.PageRequest{})
	require.NoError(t, err)
	require.Equal(t, []int64{second}, pageIDs(page))
	page, err = h.Q.ListJobs(ctx, litequeue.JobQuery{CreatedFrom: start, CreatedBefore: mid}, litequeue.PageRequest{})
	require.NoError(t, err)
	require.Equal(t, []int64{first}, pageIDs(page))
	n, err := h.Q.CountJobs(ctx, litequeue.JobQuery{Kinds: []string{Email{}.Kind(), "other"}}, 0)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = h.Q.CountJobs(ctx, litequeue.JobQuery{Kinds: []string{"other"}}, 0)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	n, err = h.Q.CountJobs(ctx, litequeue.JobQuery{FinishedBefore: h.Clock.Now().Add(time.Hour)}, 0)
	require.NoError(t, err)
	require.Equal(t, 0, n, "no job has finished")
	n, err = h.Q.CountJobs(ctx, litequeue.JobQuery{Kinds: []string{"\xff"}}, 0)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a kind no name can be selects nothing")
}
