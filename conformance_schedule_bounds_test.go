package litequeue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Schedules that run at once, end at a date or after a number of runs, and
// the occurrence a job runs for, on the mock clock.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"ScheduleRunImmediatelyRunsOnceAtRegistrationNotAtEachStart", testScheduleRunImmediately},
		{"ScheduleEndsAtItsEndDate", testScheduleEndAt},
		{"ScheduleRunLimitHoldsAcrossProcessesAndRestarts", testScheduleMaxRuns},
		{"HandlerSeesTheOccurrenceItRunsFor", testScheduleOccurrenceOnDelivery},
	}...)
}

// tickJobs lists the Tick jobs, oldest first.
func tickJobs(t *testing.T, q *litequeue.Queue) []litequeue.JobInfo {
	t.Helper()
	jobs, err := q.Jobs(context.Background(), litequeue.JobFilter{Kind: Tick{}.Kind(), Order: litequeue.OrderNextDue})
	require.NoError(t, err)
	return jobs
}

func testScheduleRunImmediately(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	addr := b.Fresh(t)
	reg := utc(2026, 3, 2, 6, 0)
	s := litequeue.Schedule{Name: "daily", Cron: "0 9 * * *", Job: Tick{"daily"}, RunImmediately: true, Missed: litequeue.MissedSkip}
	h := open(t, b, addr, reg, nil)
	c, err := h.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleCreated, c)
	require.Equal(t, reg, scheduleNamed(t, h.Q, "daily").NextRun.UTC(), "the first occurrence is the registration")
	require.NoError(t, h.Q.Close())

	// The first process starts ten minutes later: past the grace, but the
	// immediate run is never skipped as missed.
	h2 := open(t, b, addr, reg.Add(10*time.Minute), nil)
	c, err = h2.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUnchanged, c)
	h2.start(t)
	h2.Ev.Wait(t, litequeue.EventEnqueued, 0, 1)
	jobs := tickJobs(t, h2.Q)
	require.Len(t, jobs, 1)
	require.Equal(t, reg, jobs[0].Occurrence.UTC())
	info := scheduleNamed(t, h2.Q, "daily")
	require.Equal(t, utc(2026, 3, 2, 9, 0), info.NextRun.UTC(), "then the cron's times")
	require.Zero(t, info.MissedCount)
	require.Equal(t, int64(1), info.RunCount)
	require.NoError(t, h2.Q.Close())

	// A restart registers it again: it does not run again.
	h3 := open(t, b, addr, reg.Add(20*time.Minute), nil)
	c, err = h3.Q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUnchanged, c)
	h3.start(t)
	h3.Clock.Set(utc(2026, 3, 2, 9, 0))
	h3.Ev.Wait(t, litequeue.EventEnqueued, 0, 1)
	require.Len(t, tickJobs(t, h3.Q), 2, "the immediate run and 09:00, nothing else")

	// An existing schedule that never ran runs at the registration that
	// sets RunImmediately; a later one changes nothing.
	_, err = h3.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "weekly", Cron: "0 9 * * 1", Job: Tick{"weekly"}})
	require.NoError(t, err)
	c, err = h3.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "weekly", Cron: "0 9 * * 1", Job: Tick{"weekly"}, RunImmediately: true})
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUpdated, c)
	h3.Ev.Wait(t, litequeue.EventEnqueued, 0, 2)
	require.True(t, scheduleNamed(t, h3.Q, "weekly").RunImmediately)
	require.Equal(t, utc(2026, 3, 9, 9, 0), scheduleNamed(t, h3.Q, "weekly").NextRun.UTC())
}

func testScheduleEndAt(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	start := utc(2026, 3, 2, 0, 0)
	h := open(t, b, b.Fresh(t), start, nil)
	end := start.Add(2*time.Hour + 30*time.Minute)
	_, err := h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "bounded", Every: time.Hour, Job: Tick{"b"}, EndAt: end})
	require.NoError(t, err)
	require.Equal(t, []time.Time{start.Add(time.Hour), start.Add(2 * time.Hour)},
		utcAll(scheduleNamed(t, h.Q, "bounded").NextRuns(start, 5)), "NextRuns stops at the end")
	h.start(t)
	for i := 1; i <= 2; i++ {
		h.Clock.Set(start.Add(time.Duration(i) * time.Hour))
		h.Ev.Wait(t, litequeue.EventEnqueued, 0, i)
	}
	info := scheduleNamed(t, h.Q, "bounded")
	require.True(t, info.Ended, "the next occurrence would be after EndAt")
	require.True(t, info.NextRun.IsZero())
	require.Empty(t, info.NextRuns(start, 5))
	require.Equal(t, end, info.EndAt.UTC())
	hist, err := h.Q.ScheduleHistory(ctx, "bounded", 1)
	require.NoError(t, err)
	require.Equal(t, "ended", hist[0].Type)
	require.Equal(t, "end date passed: 2026-03-02T02:30:00Z", hist[0].Detail)
	h.Clock.Set(start.Add(5 * time.Hour))
	h.flush(t)
	require.Len(t, tickJobs(t, h.Q), 2)

	// Moving the end date of an ended schedule starts it again.
	_, err = h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "bounded", Every: time.Hour, Job: Tick{"b"}, EndAt: start.Add(24 * time.Hour)})
	require.NoError(t, err)
	info = scheduleNamed(t, h.Q, "bounded")
	require.False(t, info.Ended)
	require.Equal(t, start.Add(6*time.Hour), info.NextRun.UTC())

	// An end date already past: registered, ended, never runs.
	_, err = h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "over", Cron: "@hourly", Job: Tick{"o"}, EndAt: start})
	require.NoError(t, err)
	require.True(t, scheduleNamed(t, h.Q, "over").Ended)
	_, err = h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "bad", Cron: "@hourly", Job: Tick{"o"}, MaxRuns: -1})
	require.ErrorIs(t, err, litequeue.ErrInvalidSchedule)
}

func utcAll(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func testScheduleMaxRuns(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	addr := b.Fresh(t)
	start := utc(2026, 3, 2, 0, 0)
	a := open(t, b, addr, start, nil)
	c := open(t, b, addr, start, nil)
	s := litequeue.Schedule{Name: "thrice", Cron: "*/10 * * * *", Job: Tick{"t"}, MaxRuns: 3}
	for _, h := range []*Harness{a, c} {
		_, err := h.Q.RegisterSchedule(ctx, s)
		require.NoError(t, err)
		h.start(t)
	}
	enqueued := func() int { return a.Ev.Count(litequeue.EventEnqueued, 0) + c.Ev.Count(litequeue.EventEnqueued, 0) }
	for i := 1; i <= 3; i++ {
		at := start.Add(time.Duration(i) * 10 * time.Minute)
		a.Clock.Set(at)
		c.Clock.Set(at)
		waitFor(t, fmt.Sprintf("occurrence %d is enqueued", i), func() bool { return enqueued() >= i })
	}
	info := scheduleNamed(t, a.Q, "thrice")
	require.True(t, info.Ended)
	require.Equal(t, int64(3), info.RunCount)
	require.Equal(t, 3, info.MaxRuns)
	for _, h := range []*Harness{a, c} {
		h.Clock.Set(start.Add(2 * time.Hour))
		h.flush(t)
	}
	require.Len(t, tickJobs(t, a.Q), 3, "three runs, by two processes")
	hist, err := a.Q.ScheduleHistory(ctx, "thrice", 1)
	require.NoError(t, err)
	require.Equal(t, "ended", hist[0].Type)
	require.Equal(t, "run limit reached: 3 runs", hist[0].Detail)
	require.NoError(t, c.Q.Close())

	// A restart with a raised limit: from the next occurrence after now,
	// up to the new limit; the count is kept.
	_, err = a.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "thrice", Cron: "*/10 * * * *", Job: Tick{"t"}, MaxRuns: 4})
	require.NoError(t, err)
	info = scheduleNamed(t, a.Q, "thrice")
	require.False(t, info.Ended)
	require.Equal(t, start.Add(2*time.Hour+10*time.Minute), info.NextRun.UTC())
	require.Equal(t, []time.Time{start.Add(2*time.Hour + 10*time.Minute)}, utcAll(info.NextRuns(start, 5)), "one run left")
	n := a.Ev.Count(litequeue.EventEnqueued, 0)
	a.Clock.Set(start.Add(2*time.Hour + 10*time.Minute))
	a.Ev.Wait(t, litequeue.EventEnqueued, 0, n+1)
	require.True(t, scheduleNamed(t, a.Q, "thrice").Ended)
	require.Len(t, tickJobs(t, a.Q), 4)

	// Triggers do not count.
	_, err = a.Q.TriggerSchedule(ctx, "thrice")
	require.NoError(t, err)
	require.Equal(t, int64(4), scheduleNamed(t, a.Q, "thrice").RunCount)
}

func testScheduleOccurrenceOnDelivery(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	addr := b.Fresh(t)
	start := utc(2026, 3, 2, 0, 0)
	h := open(t, b, addr, start, nil)
	_, err := h.Q.RegisterSchedule(ctx, litequeue.Schedule{Name: "hourly", Every: time.Hour, Job: Tick{"h"}})
	require.NoError(t, err)
	require.NoError(t, h.Q.Close())

	// Started 90 minutes late: the 01:00 occurrence runs at 01:30 and its
	// handler is told 01:00.
	h = open(t, b, addr, start.Add(90*time.Minute), nil)
	got := make(chan time.Time, 4)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Tick]) error {
		got <- d.Occurrence
		return nil
	})
	h.start(t)
	select {
	case at := <-got:
		require.Equal(t, start.Add(time.Hour), at.UTC())
	case <-time.After(WaitLimit):
		t.Fatal("the occurrence did not run")
	}
	id, err := h.Q.TriggerSchedule(ctx, "hourly")
	require.NoError(t, err)
	select {
	case at := <-got:
		require.Equal(t, start.Add(90*time.Minute), at.UTC(), "a trigger's occurrence is when it was triggered")
	case <-time.After(WaitLimit):
		t.Fatalf("the triggered job %d did not run", id)
	}
	plain, err := h.Q.Enqueue(ctx, Tick{"plain"}, nil)
	require.NoError(t, err)
	select {
	case at := <-got:
		require.True(t, at.IsZero(), "a job not from a schedule has no occurrence")
	case <-time.After(WaitLimit):
		t.Fatalf("job %d did not run", plain)
	}
}
