package litequeue

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// Tick is the job the test schedules enqueue.
type Tick struct {
	Of string `json:"of"`
}

func (Tick) Kind() string      { return "tick" }
func (Tick) QueueName() string { return "ticks" }

// schedRound is one finished round of a queue's scheduler.
type schedRound struct {
	now, next time.Time
	wakes     uint64
}

// schedProbe follows a queue's scheduler rounds.
type schedProbe struct {
	q      *Queue
	mu     sync.Mutex
	rounds []schedRound
	ch     chan struct{}
}

func probeScheduler(t *testing.T, q *Queue) *schedProbe {
	p := &schedProbe{ch: make(chan struct{}, 1)}
	p.q = q
	hook := func(now, next time.Time, wakes uint64) {
		p.mu.Lock()
		p.rounds = append(p.rounds, schedRound{now, next, wakes})
		p.mu.Unlock()
		select {
		case p.ch <- struct{}{}:
		default:
		}
	}
	q.scheduleRound.Store(&hook)
	t.Cleanup(func() { q.scheduleRound.Store(nil) })
	return p
}

// wait returns the latest round whose clock time is at least at and which
// began after every wake of the scheduler so far (so it saw every change
// made before wait was called), waiting for one if there is none yet.
func (p *schedProbe) wait(t *testing.T, at time.Time) schedRound {
	t.Helper()
	var want uint64
	p.q.mu.Lock()
	if p.q.run != nil {
		want = p.q.run.sched.wakes.Load()
	}
	p.q.mu.Unlock()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		n := len(p.rounds)
		var last schedRound
		if n > 0 {
			last = p.rounds[n-1]
		}
		p.mu.Unlock()
		if n > 0 && !last.now.Before(at) && last.wakes >= want {
			return last
		}
		select {
		case <-p.ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for a scheduler round at %s; last %+v", at, last)
		}
	}
}

// runUntil moves the harness's clock from one scheduler wake-up to the next,
// waiting for each round, until the next wake-up is after end; then it sets
// the clock to end. It returns how many wake-ups it went through.
func (h *harness) runUntil(t *testing.T, p *schedProbe, end time.Time) int {
	t.Helper()
	r := p.wait(t, h.clock.Now())
	n := 0
	for !r.next.IsZero() && !r.next.After(end) {
		h.clock.Set(r.next)
		r = p.wait(t, r.next)
		n++
	}
	h.clock.Set(end)
	return n
}

// scheduledRunAts returns the occurrence times of the jobs a schedule
// enqueued, checking that no occurrence has two jobs.
func scheduledRunAts(t *testing.T, q *Queue, name string) []time.Time {
	t.Helper()
	rows, err := q.lite.DB().Query(`SELECT run_at, idem_key FROM lq_jobs WHERE idem_key >= ? AND idem_key < ? ORDER BY run_at`,
		store.ScheduleKeyPrefix(name), store.ScheduleKeyEnd(name))
	require.NoError(t, err)
	defer rows.Close()
	var out []time.Time
	keys := map[string]bool{}
	for rows.Next() {
		var at int64
		var key string
		require.NoError(t, rows.Scan(&at, &key))
		require.False(t, keys[key], "two jobs for occurrence key %s", key)
		keys[key] = true
		out = append(out, time.Unix(0, at).UTC())
	}
	require.NoError(t, rows.Err())
	return out
}

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

func scheduleInfo(t *testing.T, q *Queue, name string) ScheduleInfo {
	t.Helper()
	all, err := q.Schedules(context.Background())
	require.NoError(t, err)
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %q", name)
	return ScheduleInfo{}
}

// The acceptance test of the issue: a week of cron and interval schedules
// on the mock clock, across the spring-forward night in New York and a
// restart after two days down, enqueues exactly the expected occurrences,
// and the missed ones are counted and in the history.
func TestScheduleWeekAcrossDSTAndRestartEnqueuesExactlyTheExpectedOccurrences(t *testing.T) {
	ctx := context.Background()
	h := setup(t, nil)
	start := utc(2026, 3, 5, 0, 0) // Thursday; New York springs forward on Sunday 03-08 at 07:00 UTC
	h.clock.Set(start)
	register := func(q *Queue) {
		for _, s := range []Schedule{
			{Name: "nightly", Cron: "30 2 * * *", TimeZone: "America/New_York", Job: Tick{"nightly"}},
			{Name: "weekdays", Cron: "0 9 * * 1-5", TimeZone: "America/New_York", Job: Tick{"weekdays"}, Missed: MissedSkip},
			{Name: "every-4h", Every: 4 * time.Hour, Job: Tick{"every-4h"}, Missed: MissedCatchUp, CatchUp: 3},
		} {
			_, err := q.RegisterSchedule(ctx, s)
			require.NoError(t, err)
		}
	}
	register(h.q)
	p := probeScheduler(t, h.q)
	h.start(t)
	wakeups := h.runUntil(t, p, utc(2026, 3, 8, 12, 0))

	// Down for two days: Close, the clock moves on, Open, register again
	// (unchanged: nothing written), Start.
	require.NoError(t, h.q.Close())
	h.clock.Set(utc(2026, 3, 10, 12, 0))
	q, err := Open(h.path, &h.opts)
	require.NoError(t, err)
	h.q = q
	for _, name := range []string{"nightly", "weekdays", "every-4h"} {
		require.False(t, scheduleInfo(t, q, name).NextRun.After(h.clock.Now()), "%s is due at the restart", name)
	}
	register(q)
	p = probeScheduler(t, q)
	h.start(t)
	wakeups += h.runUntil(t, p, utc(2026, 3, 12, 0, 0))
	require.NoError(t, q.Stop(ctx))

	require.Equal(t, []time.Time{
		utc(2026, 3, 5, 7, 30), utc(2026, 3, 6, 7, 30), utc(2026, 3, 7, 7, 30),
		utc(2026, 3, 8, 7, 30), // 02:30 EST does not exist that night: 03:30 EDT, once
		// 03-09 06:30 was missed while down; run once now: the latest, 03-10 06:30, late
		utc(2026, 3, 10, 6, 30), utc(2026, 3, 11, 6, 30),
	}, scheduledRunAts(t, q, "nightly"))
	require.Equal(t, []time.Time{
		utc(2026, 3, 5, 14, 0), utc(2026, 3, 6, 14, 0),
		// Monday 03-09 13:00 missed while down: skipped
		utc(2026, 3, 10, 13, 0), utc(2026, 3, 11, 13, 0),
	}, scheduledRunAts(t, q, "weekdays"))
	var want4h []time.Time
	for at := start.Add(4 * time.Hour); !at.After(utc(2026, 3, 12, 0, 0)); at = at.Add(4 * time.Hour) {
		// Down from 03-08 12:00 to 03-10 12:00: of the 11 late occurrences
		// 03-08 16:00 .. 03-10 08:00 the latest 3 are caught up.
		if at.After(utc(2026, 3, 8, 12, 0)) && at.Before(utc(2026, 3, 10, 0, 0)) {
			continue
		}
		want4h = append(want4h, at)
	}
	require.Equal(t, want4h, scheduledRunAts(t, q, "every-4h"))

	for name, missed := range map[string]int64{"nightly": 1, "weekdays": 1, "every-4h": 8} {
		info := scheduleInfo(t, q, name)
		require.Equal(t, missed, info.MissedCount, name)
		require.Equal(t, "pending", info.LastOutcome, name)
		hist, err := q.ScheduleHistory(ctx, name, 0)
		require.NoError(t, err)
		var skipped []ScheduleEvent
		for _, e := range hist {
			if e.Type == "skipped" {
				skipped = append(skipped, e)
			}
		}
		require.Len(t, skipped, 1, "%s: one skipped event for the downtime: %+v", name, hist)
		require.Equal(t, missed, skipped[0].Count)
		require.Contains(t, skipped[0].Detail, "missed")
		require.Equal(t, "registered", hist[len(hist)-1].Type, "the oldest event")
	}
	require.Equal(t, utc(2026, 3, 9, 6, 30), func() time.Time {
		hist, _ := q.ScheduleHistory(ctx, "nightly", 0)
		for _, e := range hist {
			if e.Type == "skipped" {
				return e.Occurrence.UTC()
			}
		}
		return time.Time{}
	}())
	// One timer per occurrence, not per tick: the loop above woke the
	// scheduler about as often as there were occurrences.
	require.Less(t, wakeups, 6+4+40+5, "wake-ups")
	t.Logf("%d scheduler wake-ups for a week", wakeups)
}

// The scheduler, moved from wake-up to wake-up across New York's fall-back
// night, enqueues a */30 schedule's every half hour of real time: both
// passes of the repeated hour, none twice.
func TestScheduleMinuteStepRunsBothPassesOfTheRepeatedHour(t *testing.T) {
	ctx := context.Background()
	h := setup(t, nil)
	h.clock.Set(utc(2026, 11, 1, 4, 0)) // 00:00 EDT; 02:00 EDT becomes 01:00 EST at 06:00 UTC
	_, err := h.q.RegisterSchedule(ctx, Schedule{Name: "half-hourly", Cron: "*/30 * * * *", TimeZone: "America/New_York", Job: Tick{"half"}})
	require.NoError(t, err)
	p := probeScheduler(t, h.q)
	h.start(t)
	h.runUntil(t, p, utc(2026, 11, 1, 8, 0))
	require.NoError(t, h.q.Stop(ctx))
	var want []time.Time
	for at := utc(2026, 11, 1, 4, 30); !at.After(utc(2026, 11, 1, 8, 0)); at = at.Add(30 * time.Minute) {
		want = append(want, at) // 00:30 EDT … 01:30 EDT, 01:00 EST … 03:00 EST
	}
	require.Equal(t, want, scheduledRunAts(t, h.q, "half-hourly"))
}

func TestRegisterScheduleIsIdempotentAndUpdatesAChangedDefinition(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	h := setup(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	s := Schedule{Name: "report", Cron: "0 6 * * *", TimeZone: "Europe/Berlin", Job: Tick{"v1"}}
	c, err := h.q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, ScheduleCreated, c)
	first := scheduleInfo(t, h.q, "report")
	require.Equal(t, time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC), first.NextRun.UTC()) // 06:00 CET

	for range 3 {
		c, err = h.q.RegisterSchedule(ctx, s)
		require.NoError(t, err)
		require.Equal(t, ScheduleUnchanged, c)
	}
	require.Equal(t, first.Revision, scheduleInfo(t, h.q, "report").Revision)

	// A new payload: updated, same next run.
	h.clock.Add(time.Hour)
	s.Job = Tick{"v2"}
	c, err = h.q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, ScheduleUpdated, c)
	got := scheduleInfo(t, h.q, "report")
	require.JSONEq(t, `{"of":"v2"}`, string(got.Payload))
	require.Equal(t, first.NextRun, got.NextRun)
	require.Greater(t, got.Revision, first.Revision)
	require.Contains(t, logs.String(), "schedule updated")
	require.Contains(t, logs.String(), `payload {\"of\":\"v1\"} -> {\"of\":\"v2\"}`)

	// A new time: the next run moves.
	s.Cron = "0 7 * * *"
	c, err = h.q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, ScheduleUpdated, c)
	require.Equal(t, time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC), scheduleInfo(t, h.q, "report").NextRun.UTC())

	hist, err := h.q.ScheduleHistory(ctx, "report", 0)
	require.NoError(t, err)
	var types []string
	for _, e := range hist {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"updated", "updated", "registered"}, types)

	// Pausing survives registration by a restarting process.
	require.NoError(t, h.q.PauseSchedule(ctx, "report"))
	c, err = h.q.RegisterSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, ScheduleUnchanged, c)
	require.True(t, scheduleInfo(t, h.q, "report").Paused)
}

func TestScheduleBadInputIsAClearErrorNamingTheFieldAndStoresNothing(t *testing.T) {
	ctx := context.Background()
	h := setup(t, nil)
	cases := []struct {
		s     Schedule
		field string
		msg   string
	}{
		{Schedule{Name: "a", Cron: "61 * * * *", Job: Tick{}}, "Cron", "invalid cron expression"},
		{Schedule{Name: "b", Cron: "every day", Job: Tick{}}, "Cron", "invalid cron expression"},
		{Schedule{Name: "c", Cron: "0 0 30 2 *", Job: Tick{}}, "Cron", "matches no date"},
		{Schedule{Name: "d", Cron: "TZ=Europe/Paris 0 9 * * *", Job: Tick{}}, "Cron", "set Schedule.TimeZone"},
		{Schedule{Name: "e", Cron: "0 9 * * *", TimeZone: "Mars/Olympus", Job: Tick{}}, "TimeZone", "unknown time zone"},
		{Schedule{Name: "f", Cron: "0 9 * * *", TimeZone: "Local", Job: Tick{}}, "TimeZone", "differs between machines"},
		{Schedule{Name: "g", Every: 0, Job: Tick{}}, "Cron", "neither Cron nor Every"},
		{Schedule{Name: "h", Every: -time.Minute, Job: Tick{}}, "Every", "not positive"},
		{Schedule{Name: "i", Every: 5, Job: Tick{}}, "Every", "did you mean 5 * time.Second"},
		{Schedule{Name: "j", Cron: "@every 10ms", Job: Tick{}}, "Cron", "shorter than 1s"},
		{Schedule{Name: "k", Cron: "@daily", Every: time.Hour, Job: Tick{}}, "Every", "both"},
		{Schedule{Name: "l", Cron: "@daily", Job: Unencodable{F: func() {}}}, "Job", "does not encode"},
		{Schedule{Name: "m", Cron: "@daily"}, "Job", "nil job"},
		{Schedule{Name: "n", Cron: "@daily", Job: Tick{}, Queue: "bad\nqueue"}, "Queue", "control characters"},
		{Schedule{Name: "o", Cron: "@daily", Job: Tick{}, Missed: MissedCatchUp}, "CatchUp", "outside 1..100"},
		{Schedule{Name: "p", Cron: "@daily", Job: Tick{}, CatchUp: 2}, "CatchUp", "only with MissedCatchUp"},
		{Schedule{Name: "q", Cron: "@daily", Job: Tick{}, Overlap: 7}, "Overlap", "unknown policy"},
		{Schedule{Name: "r", Cron: "@daily", Job: Tick{}, Grace: -1}, "Grace", "negative"},
		{Schedule{Name: "", Cron: "@daily", Job: Tick{}}, "Name", "empty schedule name"},
	}
	for _, c := range cases {
		_, err := h.q.RegisterSchedule(ctx, c.s)
		require.Error(t, err, c.s.Name)
		require.ErrorIs(t, err, ErrInvalidSchedule)
		var se *ScheduleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, c.field, se.Field, "%s: %v", c.s.Name, err)
		require.Equal(t, c.s.Name, se.Schedule)
		require.Contains(t, err.Error(), `schedule "`+c.s.Name+`": `+c.field+":")
		require.Contains(t, err.Error(), c.msg)
	}
	all, err := h.q.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, all, "nothing stored")
	var n int
	require.NoError(t, h.q.lite.DB().QueryRow(`SELECT count(*) FROM lq_schedule_events`).Scan(&n))
	require.Zero(t, n)

	// An existing schedule survives a bad update unchanged.
	_, err = h.q.RegisterSchedule(ctx, Schedule{Name: "keep", Cron: "@hourly", Job: Tick{}})
	require.NoError(t, err)
	before := scheduleInfo(t, h.q, "keep")
	_, err = h.q.RegisterSchedule(ctx, Schedule{Name: "keep", Cron: "@hourly", TimeZone: "Nowhere/Never", Job: Tick{}})
	require.ErrorIs(t, err, ErrInvalidSchedule)
	require.Equal(t, before, scheduleInfo(t, h.q, "keep"))

	for _, op := range []func() error{
		func() error { return h.q.PauseSchedule(ctx, "nope") },
		func() error { return h.q.ResumeSchedule(ctx, "nope") },
		func() error { return h.q.RemoveSchedule(ctx, "nope") },
		func() error { _, err := h.q.TriggerSchedule(ctx, "nope"); return err },
	} {
		err := op()
		require.ErrorIs(t, err, ErrScheduleNotFound)
		require.Contains(t, err.Error(), `"nope"`)
	}
}

func TestPausedScheduleEnqueuesNothingAndResumesFromNow(t *testing.T) {
	ctx := context.Background()
	h := setup(t, nil)
	_, err := h.q.RegisterSchedule(ctx, Schedule{Name: "p", Every: time.Hour, Job: Tick{"p"}})
	require.NoError(t, err)
	p := probeScheduler(t, h.q)
	h.start(t)
	h.runUntil(t, p, utc(2026, 1, 1, 2, 30))
	require.Len(t, scheduledRunAts(t, h.q, "p"), 2)

	require.NoError(t, h.q.PauseSchedule(ctx, "p"))
	require.NoError(t, h.q.PauseSchedule(ctx, "p"), "pausing twice")
	p.wait(t, h.clock.Now())
	h.runUntil(t, p, utc(2026, 1, 1, 10, 0))
	require.Len(t, scheduledRunAts(t, h.q, "p"), 2, "nothing while paused")
	info := scheduleInfo(t, h.q, "p")
	require.True(t, info.Paused)
	require.Empty(t, info.NextRuns(h.clock.Now(), 3))

	// Trigger now works while paused and leaves the schedule alone.
	id, err := h.q.TriggerSchedule(ctx, "p")
	require.NoError(t, err)
	job, err := h.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "tick", job.Kind)
	require.Equal(t, int64(0), scheduleInfo(t, h.q, "p").MissedCount)

	require.NoError(t, h.q.ResumeSchedule(ctx, "p"))
	info = scheduleInfo(t, h.q, "p")
	require.Equal(t, utc(2026, 1, 1, 11, 0), info.NextRun.UTC(), "resumes at the next occurrence after now, not the paused ones")
	require.Equal(t, []time.Time{utc(2026, 1, 1, 11, 0), utc(2026, 1, 1, 12, 0)}, utcAll(info.NextRuns(h.clock.Now(), 2)))
	h.runUntil(t, p, utc(2026, 1, 1, 12, 0))
	require.Equal(t, []time.Time{utc(2026, 1, 1, 1, 0), utc(2026, 1, 1, 2, 0), utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 11, 0), utc(2026, 1, 1, 12, 0)},
		scheduledRunAts(t, h.q, "p"))
	require.Zero(t, scheduleInfo(t, h.q, "p").MissedCount, "paused occurrences are not missed")

	require.NoError(t, h.q.RemoveSchedule(ctx, "p"))
	all, err := h.q.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, all)
	require.Len(t, scheduledRunAts(t, h.q, "p"), 5, "its jobs stay")
}

func utcAll(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func TestScheduleOverlapPolicies(t *testing.T) {
	ctx := context.Background()
	h := setup(t, nil)
	// No handler runs "tick" here: every enqueued job stays pending, so the
	// previous occurrence's job is live until the test cancels it.
	for _, s := range []Schedule{
		{Name: "allow", Every: time.Hour, Job: Tick{"allow"}},
		{Name: "skip", Every: time.Hour, Job: Tick{"skip"}, Overlap: OverlapSkip},
		{Name: "wait", Every: time.Hour, Job: Tick{"wait"}, Overlap: OverlapWait},
	} {
		_, err := h.q.RegisterSchedule(ctx, s)
		require.NoError(t, err)
	}
	p := probeScheduler(t, h.q)
	h.start(t)
	h.runUntil(t, p, utc(2026, 1, 1, 3, 0))
	require.Len(t, scheduledRunAts(t, h.q, "allow"), 3)
	require.Equal(t, []time.Time{utc(2026, 1, 1, 1, 0)}, scheduledRunAts(t, h.q, "skip"))
	require.Equal(t, []time.Time{utc(2026, 1, 1, 1, 0)}, scheduledRunAts(t, h.q, "wait"))
	require.True(t, scheduleInfo(t, h.q, "wait").Waiting)
	require.Equal(t, utc(2026, 1, 1, 2, 0), scheduleInfo(t, h.q, "wait").NextRun.UTC(), "the held occurrence")
	hist, err := h.q.ScheduleHistory(ctx, "skip", 0)
	require.NoError(t, err)
	require.Equal(t, "skipped", hist[0].Type)
	require.Contains(t, hist[0].Detail, "overlap skip")
	require.Zero(t, scheduleInfo(t, h.q, "skip").MissedCount, "an overlap skip is not a missed occurrence")

	// The first job of "wait" goes away at 03:30: the held 02:00 occurrence
	// is enqueued at the next check (on time: it was held), and 03:00,
	// which came due meanwhile and is now late, is missed: run once skips it,
	// since an on-time occurrence runs.
	h.runUntil(t, p, utc(2026, 1, 1, 3, 30))
	require.Len(t, scheduledRunAts(t, h.q, "wait"), 1)
	jobs, err := h.q.Jobs(ctx, JobFilter{Kind: "tick"})
	require.NoError(t, err)
	for _, j := range jobs {
		if strings.Contains(string(j.Payload), `"wait"`) {
			_, err := h.q.Cancel(ctx, j.ID)
			require.NoError(t, err)
		}
	}
	h.runUntil(t, p, utc(2026, 1, 1, 3, 40))
	waited, err := h.q.ScheduleHistory(ctx, "wait", 0)
	require.NoError(t, err)
	var enq []string
	for _, e := range waited {
		if e.Type == "enqueued" {
			enq = append(enq, e.Occurrence.UTC().Format("15:04")+" "+e.Detail)
		}
	}
	sort.Strings(enq)
	require.Equal(t, []string{"01:00 ", "02:00 "}, enq)
	require.False(t, scheduleInfo(t, h.q, "wait").Waiting)
	require.Equal(t, int64(1), scheduleInfo(t, h.q, "wait").MissedCount, "03:00 passed while held")
}

// A handler that runs the scheduled jobs; a concurrent trigger and a
// removal while the scheduler runs do not upset it.
func TestScheduledJobsRunThroughHandlers(t *testing.T) {
	ctx := context.Background()
	h := setup(t, func(o *Options) { o.Queues = []QueueConfig{NewQueueConfig("ticks")} })
	var mu sync.Mutex
	var ran []string
	Register(h.q, func(ctx context.Context, d *Delivery[Tick]) error {
		mu.Lock()
		ran = append(ran, d.Job.Of)
		mu.Unlock()
		return nil
	})
	_, err := h.q.RegisterSchedule(ctx, Schedule{Name: "run", Cron: "*/30 * * * *", Job: Tick{"run"}, Overlap: OverlapSkip})
	require.NoError(t, err)
	p := probeScheduler(t, h.q)
	h.start(t)
	for i := 1; i <= 4; i++ {
		h.runUntil(t, p, utc(2026, 1, 1, 0, 30*i))
		h.ev.wait(t, EventSucceeded, 0, i)
	}
	info := scheduleInfo(t, h.q, "run")
	require.Equal(t, "done", info.LastOutcome, "the job succeeded and was deleted")
	require.Equal(t, utc(2026, 1, 1, 2, 0), info.LastRun.UTC())
	require.Zero(t, info.MissedCount)
	mu.Lock()
	require.Equal(t, []string{"run", "run", "run", "run"}, ran)
	mu.Unlock()
	require.Equal(t, 4, h.ev.count(EventEnqueued, 0))
}

func TestScheduleErrorsAreValues(t *testing.T) {
	err := error(&ScheduleError{Schedule: "s", Field: "Job", Err: ErrInvalidJob})
	require.True(t, errors.Is(err, ErrInvalidSchedule))
	require.True(t, errors.Is(err, ErrInvalidJob))
}

func TestEveryDescriptorCountsFromRegistration(t *testing.T) {
	ctx := context.Background()
	h := setup(t, nil)
	h.clock.Set(utc(2026, 1, 1, 0, 7))
	_, err := h.q.RegisterSchedule(ctx, Schedule{Name: "e", Cron: "@every 90m", Job: Tick{}})
	require.NoError(t, err)
	info := scheduleInfo(t, h.q, "e")
	require.Equal(t, utc(2026, 1, 1, 1, 37), info.NextRun.UTC())
	require.Equal(t, []time.Time{utc(2026, 1, 1, 1, 37), utc(2026, 1, 1, 3, 7)}, utcAll(info.NextRuns(h.clock.Now(), 2)))
}
