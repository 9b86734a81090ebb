package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	require.Equal(t, string(want), got)
}

func TestTablesMatchGoldenFiles(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"stats", []string{"stats", fx.path}},
		{"jobs", []string{"jobs", fx.path}},
		{"jobs_pending_next_due", []string{"jobs", fx.path, "--state", "ready,scheduled", "--order", "next-due"}},
		{"jobs_kind", []string{"jobs", "--kind", "resize", fx.path}},
		{"dead", []string{"dead", fx.path}},
		{"dead_none", []string{"dead", fx.path, "--queue", "media"}},
		{"show_scheduled", []string{"show", fx.path, "6"}},
		{"show_running", []string{"show", fx.path, "9"}},
		{"show_dead", []string{"show", fx.path, "3"}},
		{"show_completed", []string{"show", fx.path, "10"}},
		{"help", []string{"help"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lq(t, "", tc.args...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Empty(t, r.stderr)
			golden(t, tc.name, r.stdout)
		})
	}
}

func TestJobsPagingTellsHowToSeeMore(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "jobs", fx.path, "--limit", "2", "--offset", "1")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.True(t, strings.HasPrefix(lines[1], "9 "), r.stdout)
	require.True(t, strings.HasPrefix(lines[2], "8 "), r.stdout)
	require.Equal(t, "showing 2 from offset 1; there may be more: --offset 3\n", r.stderr)

	r = lq(t, "", "jobs", fx.path, "--limit", "0")
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 11)
}

func TestNowFlagOverridesTheEnvironment(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "stats", fx.path, "--now", fixtureNow.Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1h10m")
}

// decode runs lqinspect with --json and decodes its output into v.
func decode(t *testing.T, v any, args ...string) {
	t.Helper()
	r := lq(t, "", append(args, "--json")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), v), r.stdout)
}

func TestStatsJSON(t *testing.T) {
	fx := newFixture(t)
	var got []map[string]any
	decode(t, &got, "stats", fx.path)
	require.Len(t, got, 3)
	require.Equal(t, map[string]any{
		"queue": "default", "ready": 2.0, "scheduled": 0.0, "running": 0.0, "completed": 1.0, "dead": 0.0,
		"oldest_ready": float64(10*time.Minute + 10*time.Second),
	}, got[0])
	require.Equal(t, map[string]any{
		"queue": "imports", "ready": 0.0, "scheduled": 1.0, "running": 0.0, "completed": 0.0, "dead": 3.0,
		"oldest_ready": 0.0, "next_due": "2026-01-01T00:10:30Z",
	}, got[1])
	require.Equal(t, "media", got[2]["queue"])
	require.Equal(t, 1.0, got[2]["running"])
}

func TestJobsJSON(t *testing.T) {
	fx := newFixture(t)
	var got []map[string]any
	decode(t, &got, "jobs", fx.path, "--queue", "default")
	require.Len(t, got, 3)
	ids := []any{got[0]["id"], got[1]["id"], got[2]["id"]}
	require.Equal(t, []any{10.0, 2.0, 1.0}, ids)
	first := got[2]
	require.Equal(t, "default", first["queue"])
	require.Equal(t, "send_email", first["kind"])
	require.Equal(t, "ready", first["state"])
	require.Equal(t, 0.0, first["attempt"])
	require.Equal(t, 0.0, first["priority"])
	require.Equal(t, "welcome-42", first["key"])
	require.Equal(t, map[string]any{"to": "ada@example.com"}, first["payload"])
	require.Equal(t, "2026-01-01T00:00:00Z", first["created_at"])
	require.Equal(t, "2026-01-01T00:00:00Z", first["run_at"])
	require.Equal(t, "2026-01-01T00:00:00Z", first["visible_at"])
	require.NotContains(t, first, "attempted_at")
	require.NotContains(t, first, "last_error")

	decode(t, &got, "jobs", fx.path, "--state", "completed")
	require.Len(t, got, 1)
	require.Equal(t, "completed", got[0]["state"])
	require.Equal(t, "2026-01-01T00:10:00Z", got[0]["finished_at"])

	decode(t, &got, "jobs", fx.path, "--queue", "media", "--kind", "x", "--state", "running", "--limit", "1", "--offset", "5")
	require.Equal(t, []map[string]any{}, got)
}

func TestJobsJSONIsAnEmptyArrayWhenNothingMatches(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "jobs", fx.path, "--kind", "no-such-kind", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
}

func TestDeadAndShowJSON(t *testing.T) {
	fx := newFixture(t)
	var dead []litequeue.JobInfo
	decode(t, &dead, "dead", fx.path)
	require.Len(t, dead, 3)
	for i, j := range dead {
		require.Equal(t, int64(5-i), j.ID)
		require.Equal(t, litequeue.StateDead, j.State)
		require.Equal(t, "permanent error", j.DeadReason)
		require.Equal(t, t0.Add(10*time.Minute), j.FinishedAt.UTC())
	}

	var show map[string]any
	decode(t, &show, "show", fx.path, "6")
	require.Equal(t, 6.0, show["id"])
	require.Equal(t, "scheduled", show["state"])
	require.Equal(t, "2026-01-01T00:10:30Z", show["visible_at"])
	require.Equal(t, "dial tcp 10.0.0.7:443: connection refused", show["last_error"])
	require.Equal(t, []any{map[string]any{
		"attempt": 1.0, "started_at": "2026-01-01T00:10:00Z", "finished_at": "2026-01-01T00:10:00Z",
		"error": "dial tcp 10.0.0.7:443: connection refused", "decision": "retry", "delay": float64(30 * time.Second),
	}}, show["attempts"])
}

func TestReadCommandsWorkWhileAnotherConnectionHoldsTheWriteLock(t *testing.T) {
	fx := newFixture(t)
	holdWriteLock(t, fx.path)
	for _, args := range [][]string{{"stats", fx.path}, {"jobs", fx.path}, {"dead", fx.path}, {"show", fx.path, "1"}} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
}

func TestStatsWatchRefreshesOnEveryTickUntilInterrupted(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := make(chan time.Time)
	stopped := false
	done := make(chan result)
	go func() {
		done <- lqApp(t, func(a *app) {
			a.ctx = ctx
			a.newTicker = func(d time.Duration) (<-chan time.Time, func()) {
				require.Equal(t, time.Second, d)
				return tick, func() { stopped = true }
			}
		}, "", "stats", "--watch", fx.path)
	}()
	// An unbuffered send completes only when the loop waits for the next
	// tick, that is after a refresh.
	tick <- time.Time{}
	tick <- time.Time{}
	cancel()
	r := <-done
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, stopped, "the ticker was not stopped")
	frames := strings.Split(r.stdout, clearScreen)[1:]
	require.GreaterOrEqual(t, len(frames), 2)
	for _, f := range frames[:2] {
		require.Contains(t, f, "Every 1s: lqinspect stats "+fx.path)
		require.Contains(t, f, "imports  0      1          0        3")
	}
}
