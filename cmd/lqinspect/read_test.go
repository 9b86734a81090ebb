package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// heldBy matches the random process id show prints for a running job.
var heldBy = regexp.MustCompile(`(held by: +)process [0-9]+`)

// golden compares got with testdata/name.golden, or rewrites it with -update.
// This process's host:pid, which the attempts the fixture ran record, reads
// HOST:PID.
func golden(t *testing.T, name, got string) {
	t.Helper()
	host, _ := os.Hostname()
	got = strings.ReplaceAll(got, host+":"+strconv.Itoa(os.Getpid()), "HOST:PID")
	got = heldBy.ReplaceAllString(got, "${1}process ID")
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
	require.Equal(t, "showing 2; more match: --after 8 for the next page, or --limit 0 for all\n", r.stderr)

	// The cursor it names starts the next page.
	r = lq(t, "", "jobs", fx.path, "--limit", "2", "--after", "8")
	require.Equal(t, 0, r.code, r.stderr)
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.True(t, strings.HasPrefix(lines[1], "7 "), r.stdout)

	// The last page is not said to have more.
	r = lq(t, "", "jobs", fx.path, "--limit", "2", "--offset", "8")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)

	// --json is never cut silently either: stdout stays one document.
	r = lq(t, "", "jobs", fx.path, "--limit", "2", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page []litequeue.JobInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page, 2)
	require.Contains(t, r.stderr, "more match")

	// Without --limit a page of 100: every job of the fixture.
	r = lq(t, "", "jobs", fx.path, "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page, 10)
	require.Empty(t, r.stderr)

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
		"cancelled": 0.0, "waiting": 0.0, "paused": false, "oldest_ready": "10m10s",
	}, got[0])
	require.Equal(t, map[string]any{
		"queue": "imports", "ready": 0.0, "scheduled": 1.0, "running": 0.0, "completed": 0.0, "dead": 3.0,
		"cancelled": 0.0, "waiting": 0.0, "paused": false, "oldest_ready": "0s", "next_due": "2026-01-01T00:10:30Z",
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
	// The attempt names the process that ran it: the fixture's queue, in
	// this process.
	attempts := show["attempts"].([]any)
	require.Len(t, attempts, 1)
	at := attempts[0].(map[string]any)
	host, _ := os.Hostname()
	require.Equal(t, host, at["host"])
	require.Equal(t, float64(os.Getpid()), at["pid"])
	require.NotZero(t, at["process"])
	require.Equal(t, show["process"], at["process"], "the job names the process whose claim took it")
	delete(at, "host")
	delete(at, "pid")
	delete(at, "process")
	require.Equal(t, map[string]any{
		"attempt": 1.0, "started_at": "2026-01-01T00:10:00Z", "finished_at": "2026-01-01T00:10:00Z",
		"error": "dial tcp 10.0.0.7:443: connection refused", "decision": "retry", "delay": "30s",
	}, at)
}

func TestReadCommandsWorkWhileAnotherConnectionHoldsTheWriteLock(t *testing.T) {
	fx := newFixture(t)
	holdWriteLock(t, fx.path)
	for _, args := range [][]string{{"stats", fx.path}, {"jobs", fx.path}, {"dead", fx.path}, {"show", fx.path, "1"}} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
}

// watch runs stats --watch with args, lets it refresh ticks times, then
// interrupts it; adjust sets the app's seams.
func watch(t *testing.T, ticks int, adjust func(a *app), args ...string) (result, time.Duration, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := make(chan time.Time)
	var interval time.Duration
	stopped := false
	done := make(chan result)
	go func() {
		done <- lqApp(t, func(a *app) {
			a.ctx = ctx
			a.newTicker = func(d time.Duration) (<-chan time.Time, func()) {
				interval = d
				return tick, func() { stopped = true }
			}
			if adjust != nil {
				adjust(a)
			}
		}, "", append([]string{"stats", "--watch"}, args...)...)
	}()
	// An unbuffered send completes only when the loop waits for the next
	// tick, that is after a refresh.
	for range ticks {
		tick <- time.Time{}
	}
	cancel()
	r := <-done
	return r, interval, stopped
}

func TestStatsWatchRefreshesOnEveryTickUntilInterrupted(t *testing.T) {
	fx := newFixture(t)
	r, interval, stopped := watch(t, 2, func(a *app) { a.isTerminalOut = func(io.Writer) bool { return true } }, fx.path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, time.Second, interval)
	require.True(t, stopped, "the ticker was not stopped")
	frames := strings.Split(r.stdout, clearScreen)[1:]
	require.GreaterOrEqual(t, len(frames), 2)
	for _, f := range frames[:2] {
		require.Contains(t, f, "Every 1s: lqinspect stats "+fx.path)
		require.Contains(t, f, "imports  0      1          0        3")
	}
}

// To a pipe, --watch writes no screen control codes; with --json it writes
// one compact JSON document per line; --interval sets the refresh.
func TestStatsWatchToAPipe(t *testing.T) {
	fx := newFixture(t)
	r, interval, _ := watch(t, 2, nil, fx.path, "--interval", "5s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 5*time.Second, interval)
	require.NotContains(t, r.stdout, "\x1b")
	require.GreaterOrEqual(t, strings.Count(r.stdout, "Every 5s: lqinspect stats "+fx.path), 2)

	r, _, _ = watch(t, 2, nil, "--json", fx.path)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	for _, line := range lines {
		var stats []litequeue.QueueStats
		require.NoError(t, json.Unmarshal([]byte(line), &stats), line)
		require.Len(t, stats, 3)
	}

	r = lq(t, "", "stats", fx.path, "--watch", "--interval", "0s")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--interval 0s is not positive")
}

// A file replaced under a running --watch (restored from a backup) is
// opened again, and stderr says so.
func TestStatsWatchNoticesAReplacedFile(t *testing.T) {
	fx := newFixture(t)
	watched := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, fx.path, watched) // 3 dead letters
	id, err := fx.q.Enqueue(context.Background(), Import{File: "d.csv"}, nil)
	require.NoError(t, err)
	fx.waitEvent(t, litequeue.EventDead, id)
	copyFile(t, fx.path, watched+".new") // 4 dead letters

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := make(chan time.Time)
	done := make(chan result)
	go func() {
		done <- lqApp(t, func(a *app) {
			a.ctx = ctx
			a.newTicker = func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} }
		}, "", "stats", "--watch", "--json", watched)
	}()
	tick <- time.Time{} // the first frame is written
	require.NoError(t, os.Rename(watched+".new", watched))
	tick <- time.Time{} // the frame after it began after the rename
	tick <- time.Time{} // and has been written
	cancel()
	r := <-done
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "was replaced; showing the new file")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var first, last []litequeue.QueueStats
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, 3, first[1].Dead, "the old file's counts")
	require.Equal(t, 4, last[1].Dead, "the new file's counts")
}

// copyFile copies a queue file consistently, with SQLite's VACUUM INTO.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+from+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec("VACUUM INTO ?", to)
	require.NoError(t, err)
}
