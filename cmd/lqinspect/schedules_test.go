package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// scheduleFile makes a queue file with three schedules at t0, none run by
// a process: "every-5m" is overdue at fixtureNow; "hourly" is paused;
// "nightly" was triggered once by hand.
func scheduleFile(t *testing.T) string {
	t.Helper()
	return schedulesFile(t, func(ctx context.Context, q *litequeue.Queue, mock *clock.Mock) {
		require.NoError(t, q.PauseSchedule(ctx, "hourly"))
		mock.Add(time.Minute)
		_, err := q.TriggerSchedule(ctx, "nightly")
		require.NoError(t, err)
	},
		litequeue.Schedule{Name: "nightly", Cron: "30 2 * * *", TimeZone: "America/New_York", Job: SendEmail{To: "ops@example.com"}},
		litequeue.Schedule{Name: "every-5m", Every: 5 * time.Minute, Job: Resize{Image: "a.png", Width: 10}, Missed: litequeue.MissedCatchUp, CatchUp: 2},
		litequeue.Schedule{Name: "hourly", Cron: "@hourly", Job: Ping{}, Overlap: litequeue.OverlapSkip},
	)
}

// schedulesFile makes a queue file whose queue, at t0 on a mock clock,
// registers schedules and then calls then, when not nil, before it closes.
func schedulesFile(t *testing.T, then func(ctx context.Context, q *litequeue.Queue, mock *clock.Mock), schedules ...litequeue.Schedule) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sched.db")
	mock := clock.NewMock()
	mock.Set(t0)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	for _, s := range schedules {
		_, err := q.RegisterSchedule(ctx, s)
		require.NoError(t, err)
	}
	if then != nil {
		then(ctx, q, mock)
	}
	require.NoError(t, q.Close())
	return path
}

func TestSchedulesListsNextRunsLastRunAndMissed(t *testing.T) {
	path := scheduleFile(t)
	r := lq(t, "", "schedules", path)
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "schedules", r.stdout)

	r = lq(t, "", "schedules", path, "--json", "--runs", "2")
	require.Equal(t, 0, r.code, r.stderr)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got, 3)
	byName := map[string]map[string]any{}
	for _, s := range got {
		byName[s["name"].(string)] = s
	}
	require.Equal(t, []any{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"}, byName["every-5m"]["next_runs"])
	require.Equal(t, true, byName["every-5m"]["overdue"])
	require.Equal(t, "catch-up 2", byName["every-5m"]["missed_policy"])
	require.Equal(t, true, byName["hourly"]["paused"])
	require.Equal(t, []any{}, byName["hourly"]["next_runs"])
	require.Equal(t, []any{"2026-01-01T07:30:00Z", "2026-01-02T07:30:00Z"}, byName["nightly"]["next_runs"])
	require.Equal(t, "2026-01-01T00:01:00Z", byName["nightly"]["last_run"])
	require.Equal(t, "pending", byName["nightly"]["last_outcome"])
	require.Equal(t, map[string]any{"to": "ops@example.com"}, byName["nightly"]["payload"])
}

func TestSchedulesPauseResumeTriggerAndHistory(t *testing.T) {
	path := scheduleFile(t)
	r := lq(t, "", "schedules", path, "pause", "nightly")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "paused nightly\n", r.stdout)
	r = lq(t, "", "schedules", path, "resume", "hourly", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"schedule":"hourly","action":"resume"}`, r.stdout)
	r = lq(t, "", "schedules", path, "trigger", "every-5m")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "triggered every-5m: enqueued job 2\n", r.stdout)

	q := libraryView(t, path)
	all, err := q.Schedules(context.Background())
	require.NoError(t, err)
	state := map[string]bool{}
	for _, s := range all {
		state[s.Name] = s.Paused
	}
	require.Equal(t, map[string]bool{"nightly": true, "hourly": false, "every-5m": false}, state)
	job, err := q.Job(context.Background(), 2)
	require.NoError(t, err)
	require.Equal(t, "resize", job.Kind)
	require.Equal(t, fixtureNow, job.RunAt.UTC(), "triggered at lqinspect's now")

	r = lq(t, "", "schedules", path, "history", "hourly")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "schedules_history", r.stdout)
}

func TestSchedulesBadInvocations(t *testing.T) {
	path := scheduleFile(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"schedules", path, "pase", "nightly"}, exitUsage, `did you mean "pause"?`},
		{[]string{"schedules", path, "pause"}, exitUsage, "pause needs the NAME of a schedule"},
		{[]string{"schedules", path, "pause", "a", "b"}, exitUsage, "want FILE, or FILE followed by"},
		{[]string{"schedules", path, "pause", "nope"}, exitError, `schedule not found: "nope"`},
		{[]string{"schedules", path, "history", "nigthly"}, exitError, `no schedule "nigthly"; did you mean "nightly"?`},
		{[]string{"schedules", path, "--runs", "-1"}, exitUsage, "--runs -1 is negative"},
		{[]string{"schedules", path, "history", "hourly", "--limit", "-1"}, exitUsage, "--limit -1 is negative"},
		{[]string{"schedules", path, "--limit", "2"}, exitUsage, "--limit counts the events of history NAME; for how many next runs to list, use --runs"},
		{[]string{"schedules", path, "history", "hourly", "--runs", "2"}, exitUsage, "history takes no --runs"},
		{[]string{"schedules"}, exitUsage, "missing FILE"},
	} {
		r := lq(t, "", tc.args...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.msg, tc.args)
	}
}
