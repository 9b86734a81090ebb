package litequeue_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/store"
)

// The schedule tests of the suite: durable schedules through the public
// API on the mock clock. They move the clock straight to each expected
// occurrence and wait for its enqueue: the scheduler's alarm fires at once
// for a moment already passed, so no wake-up is lost.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"ScheduleEnqueuesEachOccurrenceOnceAcrossDST", testScheduleOccurrences},
		{"ScheduleMissedWhileDownRunsOnceAndIsCounted", testScheduleMissed},
		{"ScheduleRegistrationIsIdempotentPauseAndTrigger", testScheduleAdmin},
		{"TwoQueuesOnOneDatabaseEnqueueEachOccurrenceOnce", testScheduleTwoQueues},
		{"ScheduleBadInputStoresNothing", testScheduleBadInput},
		{"FiringPlannedBeforeAChangeOrPauseEnqueuesNothing", testFiringIsConditional},
		{"ScheduleKeepsItsJobTypesUniqueness", testScheduleUnique},
		{"ScheduleOfAReplacingUniqueJobReplacesItsPendingTwin", testScheduleUniqueReplace},
	}...)
}

// Tick is the job the suite's schedules enqueue; no handler runs it, so its
// jobs stay pending and can be listed.
type Tick struct {
	Of string `json:"of"`
}

func (Tick) Kind() string { return "conformance_tick" }

// tickRunAts lists the due times of the pending Tick jobs, oldest first.
func tickRunAts(t *testing.T, q *litequeue.Queue) []time.Time {
	t.Helper()
	jobs, err := q.Jobs(context.Background(), litequeue.JobFilter{Kind: Tick{}.Kind()})
	require.NoError(t, err)
	var out []time.Time
	for _, j := range jobs {
		out = append(out, j.RunAt.UTC())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func scheduleNamed(t *testing.T, q *litequeue.Queue, name string) litequeue.ScheduleInfo {
	t.Helper()
	all, err := q.Schedules(context.Background())
	require.NoError(t, err)
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %q", name)
	return litequeue.ScheduleInfo{}
}

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

func testScheduleOccurrences(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := open(t, b, b.Fresh(t), utc(2026, 3, 7, 0, 0), nil)
	_, err := h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "nightly", Cron: "30 2 * * *",
		TimeZone: "America/New_York", Job: Tick{"nightly"}})
	require.NoError(t, err)
	h.start(t)
	// New York springs forward on 2026-03-08: 02:30 does not exist and runs
	// at 03:30 EDT, once.
	want := []time.Time{utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30), utc(2026, 3, 10, 6, 30)}
	for i, at := range want {
		require.Equal(t, at, scheduleNamed(t, h.Q, "nightly").NextRun.UTC())
		h.Clock.Set(at)
		h.Ev.Wait(t, litequeue.EventEnqueued, 0, i+1)
	}
	require.Equal(t, want, tickRunAts(t, h.Q))
	info := scheduleNamed(t, h.Q, "nightly")
	require.Equal(t, want[3], info.LastRun.UTC())
	require.Equal(t, "pending", info.LastOutcome)
	require.Zero(t, info.MissedCount)
	require.Equal(t, utc(2026, 3, 11, 6, 30), info.NextRun.UTC())
}

func testScheduleMissed(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	addr := b.Fresh(t)
	start := utc(2026, 3, 2, 0, 0)
	h := open(t, b, addr, start, nil)
	s := litequeue.Schedule{Name: "hourly", Every: time.Hour, Job: Tick{"hourly"}}
	_, err := h.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.NoError(t, h.Q.Close())

	// Down for five and a half hours: 01:00 .. 05:00 pass unseen.
	h2 := open(t, b, addr, start.Add(5*time.Hour+30*time.Minute), nil)
	c, err := h2.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUnchanged, c)
	h2.start(t)
	h2.Ev.Wait(t, litequeue.EventEnqueued, 0, 1)
	require.Equal(t, []time.Time{utc(2026, 3, 2, 5, 0)}, tickRunAts(t, h2.Q), "run once: the latest missed occurrence")
	info := scheduleNamed(t, h2.Q, "hourly")
	require.Equal(t, int64(4), info.MissedCount)
	require.Equal(t, utc(2026, 3, 2, 6, 0), info.NextRun.UTC())
	hist, err := h2.Q.ScheduleHistory(ctx, "hourly", 0)
	require.NoError(t, err)
	var skipped []litequeue.ScheduleEvent
	for _, e := range hist {
		if e.Type == "skipped" {
			skipped = append(skipped, e)
		}
	}
	require.Len(t, skipped, 1)
	require.Equal(t, int64(4), skipped[0].Count)
	require.Equal(t, utc(2026, 3, 2, 1, 0), skipped[0].Occurrence.UTC())
	require.Equal(t, utc(2026, 3, 2, 4, 0), skipped[0].Last.UTC())
}

func testScheduleAdmin(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := setup(t, b, nil)
	s := litequeue.Schedule{Name: "report", Cron: "0 * * * *", Job: Tick{"v1"}, Overlap: litequeue.OverlapSkip}
	c, err := h.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleCreated, c)
	c, err = h.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUnchanged, c)
	s.Job = Tick{"v2"}
	c, err = h.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUpdated, c)
	require.JSONEq(t, `{"of":"v2"}`, string(scheduleNamed(t, h.Q, "report").Payload))

	require.NoError(t, h.Q.PauseSchedule(ctx, "report"))
	h.start(t)
	h.Clock.Add(3 * time.Hour)
	id, err := h.Q.TriggerSchedule(ctx, "report")
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventEnqueued, id, 1)
	require.Equal(t, []time.Time{Start.Add(3 * time.Hour)}, tickRunAts(t, h.Q), "paused: only the trigger")

	require.NoError(t, h.Q.ResumeSchedule(ctx, "report"))
	next := scheduleNamed(t, h.Q, "report").NextRun
	require.Equal(t, Start.Add(4*time.Hour), next.UTC())
	// The triggered job still waits: overlap skip skips the 13:00 occurrence.
	h.Clock.Set(next)
	waitFor(t, "the occurrence is handled", func() bool { return !scheduleNamed(t, h.Q, "report").NextRun.Equal(next) })
	require.Len(t, tickRunAts(t, h.Q), 1)
	hist, err := h.Q.ScheduleHistory(ctx, "report", 1)
	require.NoError(t, err)
	require.Equal(t, "skipped", hist[0].Type)

	require.NoError(t, h.Q.RemoveSchedule(ctx, "report"))
	require.ErrorIs(t, h.Q.RemoveSchedule(ctx, "report"), litequeue.ErrScheduleNotFound)
	all, err := h.Q.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, all)
}

func testScheduleTwoQueues(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	addr := b.Fresh(t)
	start := utc(2026, 3, 2, 0, 0)
	a := open(t, b, addr, start, nil)
	c := open(t, b, addr, start, nil)
	s := litequeue.Schedule{Name: "minutely", Cron: "* * * * *", Job: Tick{"m"}}
	for _, h := range []*Harness{a, c} {
		_, err := h.Q.RegisterSchedule(ctx, s)
		require.NoError(t, err)
		h.start(t)
	}
	const n = 30
	for i := 1; i <= n; i++ {
		at := start.Add(time.Duration(i) * time.Minute)
		a.Clock.Set(at)
		c.Clock.Set(at)
		waitFor(t, fmt.Sprintf("occurrence %d is enqueued", i), func() bool {
			return a.Ev.Count(litequeue.EventEnqueued, 0)+c.Ev.Count(litequeue.EventEnqueued, 0) >= i
		})
	}
	var want []time.Time
	for i := 1; i <= n; i++ {
		want = append(want, start.Add(time.Duration(i)*time.Minute))
	}
	require.Equal(t, want, tickRunAts(t, a.Q))
	require.Equal(t, n, a.Ev.Count(litequeue.EventEnqueued, 0)+c.Ev.Count(litequeue.EventEnqueued, 0))
	t.Logf("enqueued by the two queues: %d and %d", a.Ev.Count(litequeue.EventEnqueued, 0), c.Ev.Count(litequeue.EventEnqueued, 0))
}

func testScheduleBadInput(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := setup(t, b, nil)
	for _, s := range []litequeue.Schedule{
		{Name: "cron", Cron: "99 * * * *", Job: Tick{}},
		{Name: "zone", Cron: "@daily", TimeZone: "Nowhere/Never", Job: Tick{}},
		{Name: "every", Every: -time.Second, Job: Tick{}},
		{Name: "job", Cron: "@daily"},
	} {
		_, err := h.Q.RegisterSchedule(ctx, s)
		require.ErrorIs(t, err, litequeue.ErrInvalidSchedule, s.Name)
		var se *litequeue.ScheduleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, s.Name, se.Schedule)
	}
	all, err := h.Q.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, all)
}

// testFiringIsConditional plans firings as a process's scheduler does (from
// the stored NextAt and Revision) and lets the schedule change before each
// firing commits, as another process would between the two: a firing from
// an older revision, or of a schedule paused meanwhile, must enqueue
// nothing and leave NextAt alone. A firing from the current plan enqueues.
func testFiringIsConditional(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := setup(t, b, nil)
	st := kitlink.Of[*litequeue.Queue, *litequeue.Options]().Store(h.Q)
	def := litequeue.Schedule{Name: "hourly", Cron: "0 * * * *", Job: Tick{"v1"}}
	_, err := h.Q.RegisterSchedule(ctx, def)
	require.NoError(t, err)
	plan := func() store.Firing {
		all, err := st.Schedules(ctx, "hourly")
		require.NoError(t, err)
		require.Len(t, all, 1)
		sc := all[0]
		now := h.Clock.Now().UnixNano()
		return store.Firing{Name: sc.Name, Revision: sc.Revision, NextAt: sc.NextAt, NewNext: sc.NextAt + int64(time.Hour), Now: now,
			Jobs: []store.NewJob{{Queue: sc.Queue, Kind: sc.Kind, Payload: sc.Payload, VisibleAt: sc.NextAt, CreatedAt: now,
				Key: fmt.Sprintf("%s%d", store.ScheduleKeyPrefix(sc.Name), sc.NextAt)}}, Late: []bool{false}}
	}
	fire := func(f store.Firing) store.FireResult {
		res, err := st.FireSchedule(ctx, f)
		require.NoError(t, err)
		return res
	}
	nextAt := scheduleNamed(t, h.Q, "hourly").NextRun

	stale := plan()
	def.Job = Tick{"v2"} // same timing, new revision
	_, err = h.Q.RegisterSchedule(ctx, def)
	require.NoError(t, err)
	require.Equal(t, store.FireResult{Stale: true}, fire(stale), "planned from the revision before the update")
	require.Empty(t, tickRunAts(t, h.Q))

	paused := plan()
	require.NoError(t, h.Q.PauseSchedule(ctx, "hourly"))
	// The pause raises the revision too; a plan made with the paused
	// schedule's own revision must be refused for the pause alone.
	require.Equal(t, store.FireResult{Stale: true}, fire(paused), "planned before the pause")
	pausedNow := plan()
	require.Equal(t, store.FireResult{Stale: true}, fire(pausedNow), "planned while paused")
	require.Empty(t, tickRunAts(t, h.Q))
	require.True(t, scheduleNamed(t, h.Q, "hourly").NextRun.Equal(nextAt), "a stale firing leaves NextAt alone")

	require.NoError(t, h.Q.ResumeSchedule(ctx, "hourly"))
	res := fire(plan())
	require.False(t, res.Stale)
	require.Len(t, res.IDs, 1)
	require.Len(t, tickRunAts(t, h.Q), 1, "the current plan enqueues its occurrence")
}

// Digest is a job type unique by its whole payload (ConflictReturnExisting).
type Digest struct {
	User string `json:"user"`
}

func (Digest) Kind() string { return "conformance_digest" }

func (Digest) UniqueOptions() *litequeue.UniqueOptions { return &litequeue.UniqueOptions{} }

// Refresh is a job type whose newest enqueue replaces a pending twin.
type Refresh struct {
	Of string `json:"of"`
}

func (Refresh) Kind() string { return "conformance_refresh" }

func (Refresh) UniqueOptions() *litequeue.UniqueOptions {
	return &litequeue.UniqueOptions{OnConflict: litequeue.ConflictReplace}
}

// jobsOfKind lists the ids of the jobs of kind, oldest first.
func jobsOfKind(t *testing.T, q *litequeue.Queue, kind string) []int64 {
	t.Helper()
	jobs, err := q.Jobs(context.Background(), litequeue.JobFilter{Kind: kind})
	require.NoError(t, err)
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// testScheduleUnique: a schedule's occurrences go through its job type's
// uniqueness as a direct Enqueue does: while the first occurrence's job is
// pending, the next ones enqueue nothing and are reported as duplicates
// naming it (EventDuplicate, a "duplicate" history event); a trigger and
// a direct Enqueue meet the same twin; a job enqueued directly blocks the
// schedule's occurrence too.
func testScheduleUnique(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := setup(t, b, nil)
	_, err := h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "digest", Cron: "0 * * * *", Job: Digest{"ann"}})
	require.NoError(t, err)
	require.Equal(t, &litequeue.UniqueOptions{}, scheduleNamed(t, h.Q, "digest").Unique)
	h.start(t)
	h.Clock.Set(Start.Add(time.Hour))
	first := h.Ev.Wait(t, litequeue.EventEnqueued, 0, 1).JobID
	for i := 2; i <= 3; i++ {
		h.Clock.Set(Start.Add(time.Duration(i) * time.Hour))
		ev := h.Ev.Wait(t, litequeue.EventDuplicate, first, i-1)
		require.ErrorIs(t, ev.Err, litequeue.ErrUnique)
		require.Equal(t, Digest{}.Kind(), ev.Kind)
	}
	require.Equal(t, []int64{first}, jobsOfKind(t, h.Q, Digest{}.Kind()), "no twins pile up")
	require.Equal(t, 1, h.Ev.Count(litequeue.EventEnqueued, 0))
	info := scheduleNamed(t, h.Q, "digest")
	require.Equal(t, first, info.LastJobID)
	require.Equal(t, Start.Add(4*time.Hour), info.NextRun.UTC(), "a duplicate occurrence is handled: the schedule moves on")
	hist, err := h.Q.ScheduleHistory(ctx, "digest", 2)
	require.NoError(t, err)
	for i, e := range hist {
		require.Equal(t, "duplicate", e.Type)
		require.Equal(t, first, e.JobID, "the event names the twin")
		require.Equal(t, Start.Add(time.Duration(3-i)*time.Hour), e.Occurrence.UTC())
		require.Contains(t, e.Detail, "uniqueness")
	}

	// The same rule for a direct Enqueue and a trigger of the schedule.
	id, err := h.Q.Enqueue(ctx, Digest{"ann"}, nil)
	require.ErrorIs(t, err, litequeue.ErrUnique)
	require.Equal(t, first, id)
	id, err = h.Q.TriggerSchedule(ctx, "digest")
	require.ErrorIs(t, err, litequeue.ErrUnique)
	var ue *litequeue.UniqueError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, first, id)
	require.Equal(t, first, ue.ID)
	h.Ev.Wait(t, litequeue.EventDuplicate, first, 4)
	require.Equal(t, []int64{first}, jobsOfKind(t, h.Q, Digest{}.Kind()))

	// A job enqueued directly is the twin of a schedule's occurrence.
	bob, err := h.Q.Enqueue(ctx, Digest{"bob"}, nil)
	require.NoError(t, err)
	_, err = h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "bob", Cron: "30 * * * *", Job: Digest{"bob"}})
	require.NoError(t, err)
	h.Clock.Set(Start.Add(3*time.Hour + 30*time.Minute))
	h.Ev.Wait(t, litequeue.EventDuplicate, bob, 1)
	require.Equal(t, []int64{first, bob}, jobsOfKind(t, h.Q, Digest{}.Kind()))
	require.Zero(t, scheduleNamed(t, h.Q, "bob").LastJobID, "the schedule enqueued nothing")
}

// testScheduleUniqueReplace: with ConflictReplace each occurrence replaces
// the pending job of the one before, as a direct Enqueue would.
func testScheduleUniqueReplace(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	h := setup(t, b, nil)
	_, err := h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "refresh", Every: time.Hour, Job: Refresh{"cache"}})
	require.NoError(t, err)
	h.start(t)
	h.Clock.Set(Start.Add(time.Hour))
	first := h.Ev.Wait(t, litequeue.EventEnqueued, 0, 1).JobID
	h.Clock.Set(Start.Add(2 * time.Hour))
	h.Ev.Wait(t, litequeue.EventReplaced, first, 1)
	second := h.Ev.Wait(t, litequeue.EventEnqueued, 0, 2).JobID
	require.NotEqual(t, first, second)
	require.Equal(t, []int64{second}, jobsOfKind(t, h.Q, Refresh{}.Kind()), "the pending twin was replaced")
	require.Equal(t, second, scheduleNamed(t, h.Q, "refresh").LastJobID)
}
