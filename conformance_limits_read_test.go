package litequeue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Flow control made visible: why a job waits, and a queue's groups.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"FlowJobSaysWhyItWaitsForConcurrencyPauseAndSchedule", testFlowWaitConcurrency},
		{"FlowJobSaysWhichJobHoldsItsOrderedGroup", testFlowWaitOrdered},
		{"FlowJobSaysWhenTheRateWindowFrees", testFlowWaitRate},
		{"FlowGroupsArePagedByNameWithCountsAndHeads", testFlowGroups},
	}...)
}

func waitOf(t *testing.T, q *litequeue.Queue, id int64) (litequeue.JobInfo, *litequeue.WaitReason) {
	t.Helper()
	j, err := q.Job(context.Background(), id)
	require.NoError(t, err)
	if j.Wait != nil && !j.Wait.Until.IsZero() {
		j.Wait.Until = j.Wait.Until.UTC() // compared with Start's location
	}
	return j, j.Wait
}

// Under Concurrency 2 and KeyConcurrency 1 with two blocked jobs running,
// the second job of the busy group waits for its group and a job without
// a group for the queue; a delayed job says when it is due, a workflow's
// child waits for its parent, and a pause outranks the limits.
func testFlowWaitConcurrency(t *testing.T, b conformanceBackend) {
	h := setup(t, b, flowQueue(litequeue.QueueLimits{Concurrency: 2, KeyConcurrency: 1}))
	r, g := newRunning(), newGate(t)
	registerGrouped(h, r, g)
	ctx := context.Background()
	a1, err := h.Q.Enqueue(ctx, Grouped{Name: "a1", G: "a", Block: true}, nil)
	require.NoError(t, err)
	a2, err := h.Q.Enqueue(ctx, Grouped{Name: "a2", G: "a", Block: true}, nil)
	require.NoError(t, err)
	f1, err := h.Q.Enqueue(ctx, Grouped{Name: "f1", Block: true}, nil)
	require.NoError(t, err)
	f2, err := h.Q.Enqueue(ctx, Grouped{Name: "f2", Block: true}, nil)
	require.NoError(t, err)
	later, err := h.Q.Enqueue(ctx, Grouped{Name: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	var w litequeue.Workflow
	parent := w.Add(Grouped{Name: "parent", Block: true}, nil)
	child := w.Add(Grouped{Name: "child"}, nil)
	w.Needs(child, parent)
	wids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	_, why := waitOf(t, h.Q, a1)
	require.Nil(t, why, "a ready job with room is claimable")
	h.start(t)
	r.waitStarted(t, 2)
	h.Q.Notify()
	h.flush(t)

	j, why := waitOf(t, h.Q, a1)
	require.Equal(t, litequeue.StateRunning, j.State)
	require.Equal(t, "a", j.Group)
	require.Nil(t, why, "a running job does not wait")
	j, why = waitOf(t, h.Q, a2)
	require.Equal(t, "a", j.Group)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitGroupConcurrency, Running: 1, Limit: 1}, why)
	require.Equal(t, "its group has 1 of at most 1 jobs running", why.String())
	j, why = waitOf(t, h.Q, f2)
	require.Empty(t, j.Group)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitConcurrency, Running: 2, Limit: 2}, why)
	j, why = waitOf(t, h.Q, f1)
	require.Equal(t, litequeue.StateRunning, j.State, "a2 held by its group, f1 took the second slot")
	require.Nil(t, why)
	_, why = waitOf(t, h.Q, later)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitScheduled, Until: Start.Add(time.Hour)}, why)
	_, why = waitOf(t, h.Q, wids[child])
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitParents}, why)

	page, err := h.Q.Groups(ctx, "flow", litequeue.GroupsOptions{})
	require.NoError(t, err)
	require.Len(t, page.Groups, 1)
	require.Equal(t, litequeue.GroupInfo{Group: "a", Running: 1, Pending: 1, OldestPending: page.Groups[0].OldestPending}, page.Groups[0],
		"a1 runs, a2 is pending; no head on a queue that is not ordered")
	require.False(t, page.Groups[0].OldestPending.IsZero())

	require.NoError(t, h.Q.Pause(ctx, "flow"))
	_, why = waitOf(t, h.Q, a2)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitPaused}, why)
	require.NoError(t, h.Q.Resume(ctx, "flow"))
	g.open()
}

// In an ordered group whose first job is backing off before its retry,
// the later job names it and says it is retrying; the first says when it
// is due.
func testFlowWaitOrdered(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: "ordered", Concurrency: 10, Retry: litequeue.FixedRetry(3, time.Minute),
		Limits: litequeue.QueueLimits{Ordered: true}}))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Step]) error {
		if d.Job.Do == "retry" {
			return errors.New("not yet")
		}
		return nil
	})
	ctx := context.Background()
	s1, err := h.Q.Enqueue(ctx, Step{"s1", "retry"}, nil)
	require.NoError(t, err)
	s2, err := h.Q.Enqueue(ctx, Step{"s2", "ok"}, nil)
	require.NoError(t, err)
	_, why := waitOf(t, h.Q, s2)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitOrdered, Behind: s1, BehindState: litequeue.StateReady}, why)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventRetrying, s1, 1)
	h.Q.Notify()
	h.flush(t)
	_, why = waitOf(t, h.Q, s1)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitRetry, Until: Start.Add(time.Minute)}, why)
	j, why := waitOf(t, h.Q, s2)
	require.Equal(t, "order-1", j.Group)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitOrdered, Behind: s1, BehindState: litequeue.StateScheduled, BehindAttempt: 1}, why)
	require.Contains(t, why.String(), "retrying after 1 attempt")
}

// Under a Rate of 1 per second, the second job waits until the second
// after the first start, and a group over its KeyRate until its window.
func testFlowWaitRate(t *testing.T, b conformanceBackend) {
	h := setup(t, b, flowQueue(litequeue.QueueLimits{Rate: litequeue.Rate{N: 1, Per: time.Second},
		KeyRate: litequeue.Rate{N: 1, Per: time.Minute}}))
	r, g := newRunning(), newGate(t)
	g.open()
	registerGrouped(h, r, g)
	ctx := context.Background()
	k1, err := h.Q.Enqueue(ctx, Grouped{Name: "k1", G: "k"}, nil)
	require.NoError(t, err)
	k2, err := h.Q.Enqueue(ctx, Grouped{Name: "k2", G: "k"}, nil)
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, k1, 1)
	h.Q.Notify()
	h.flush(t)
	_, why := waitOf(t, h.Q, k2)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitRate, Running: 1, Limit: 1, Per: time.Second,
		Until: Start.Add(time.Second)}, why)
	h.Clock.Add(time.Second)
	_, why = waitOf(t, h.Q, k2)
	require.Equal(t, &litequeue.WaitReason{Kind: litequeue.WaitGroupRate, Running: 1, Limit: 1, Per: time.Minute,
		Until: Start.Add(time.Minute)}, why)
	require.Contains(t, why.String(), "group's rate limit (1 starts per 1m0s)")
}

// Groups lists the groups with live jobs by name, a page at a time, with
// their pending counts, oldest pending job and, on an ordered queue, the
// job heading each group.
func groupsUTC(p litequeue.GroupsPage) []litequeue.GroupInfo {
	for i := range p.Groups {
		p.Groups[i].OldestPending = p.Groups[i].OldestPending.UTC()
	}
	return p.Groups
}

func testFlowGroups(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: "ordered", Limits: litequeue.QueueLimits{Ordered: true}}))
	ctx := context.Background()
	heads := map[string]int64{}
	for i, grp := range []string{"c", "a", "b", "a", "c", "a"} {
		id, err := h.Q.Enqueue(ctx, Step{Name: string(rune('0' + i))}, &litequeue.EnqueueOptions{Group: grp})
		require.NoError(t, err)
		if heads[grp] == 0 {
			heads[grp] = id
		}
		h.Clock.Add(time.Second)
	}
	_, err := h.Q.Enqueue(ctx, Step{Name: "none"}, &litequeue.EnqueueOptions{Queue: "other", Group: "zz"})
	require.NoError(t, err)
	page, err := h.Q.Groups(ctx, "ordered", litequeue.GroupsOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, "b", page.Next)
	require.Equal(t, []litequeue.GroupInfo{
		{Group: "a", Pending: 3, OldestPending: Start.Add(time.Second), Head: heads["a"], HeadState: litequeue.StateReady},
		{Group: "b", Pending: 1, OldestPending: Start.Add(2 * time.Second), Head: heads["b"], HeadState: litequeue.StateReady},
	}, groupsUTC(page))
	page, err = h.Q.Groups(ctx, "ordered", litequeue.GroupsOptions{After: page.Next, Limit: 2})
	require.NoError(t, err)
	require.Empty(t, page.Next, "the last page")
	require.Equal(t, []litequeue.GroupInfo{
		{Group: "c", Pending: 2, OldestPending: Start, Head: heads["c"], HeadState: litequeue.StateReady},
	}, groupsUTC(page))
	require.Equal(t, "2", page.Groups[0].PendingText())
	js, err := h.Q.Jobs(ctx, litequeue.JobFilter{Group: "a", Order: litequeue.OrderNextDue})
	require.NoError(t, err)
	var ids []int64
	for _, j := range js {
		ids = append(ids, j.ID)
		require.Empty(t, j.Group, "listings leave Group empty")
	}
	require.Len(t, ids, 3, "JobFilter.Group lists a group's jobs")
	require.Equal(t, heads["a"], ids[0])
	// The paged live next-due listing keeps to the group too.
	js, err = h.Q.Jobs(ctx, litequeue.JobFilter{Queue: "ordered", Group: "a", Order: litequeue.OrderNextDue, Limit: 10,
		States: []litequeue.State{litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning}})
	require.NoError(t, err)
	var live []int64
	for _, j := range js {
		live = append(live, j.ID)
	}
	require.Equal(t, ids, live, "a next-due page of live jobs lists the group's only")
	js, err = h.Q.Jobs(ctx, litequeue.JobFilter{Queue: "other", Group: "a"})
	require.NoError(t, err)
	require.Empty(t, js)
	page, err = h.Q.Groups(ctx, "nosuch", litequeue.GroupsOptions{})
	require.NoError(t, err)
	require.Empty(t, page.Groups)
}
