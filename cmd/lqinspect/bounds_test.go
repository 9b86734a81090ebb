package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// farTimesFile is a queue file (an old one, or crafted: Enqueue stores no
// due time before 1970) with a ready job due in 1700, a scheduled one due
// in 2262 and a dead one that died in 1700: more than 292 years (the
// longest time.Duration) from now.
func farTimesFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "far.db")
	mock := clock.NewMock()
	mock.Set(t0)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	for range 3 {
		_, err = q.Enqueue(context.Background(), SendEmail{To: "a"}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	y1700 := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	_, err = db.Exec(`UPDATE lq_jobs SET run_at = ?, visible_at = ?, created_at = ? WHERE id = 1`, y1700, y1700, y1700)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_jobs SET run_at = ?, visible_at = ? WHERE id = 2`, int64(1<<63-1), int64(1<<63-1))
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_jobs SET state = 3, attempt = 1, last_error = 'x', dead_reason = 'permanent error',
		attempted_at = ?, finished_at = ? WHERE id = 3`, y1700, y1700)
	require.NoError(t, err)
	return path
}

func TestTimesMoreThan292YearsAwayAreShown(t *testing.T) {
	path := farTimesFile(t)
	for _, args := range [][]string{
		{"jobs", path}, {"jobs", path, "--order", "next-due"}, {"show", path, "1"}, {"show", path, "2"}, {"show", path, "3"},
		{"dead", path}, {"stats", path}, {"stats", path, "--json"}, {"jobs", path, "--json"},
	} {
		r := lq(t, "", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
	}
	r := lq(t, "", "show", path, "1")
	require.Regexp(t, `due:\s+1700-01-01T00:00:00Z \(119069d ago\)`, r.stdout)
	r = lq(t, "", "stats", path)
	require.Contains(t, r.stdout, "over 292y")
	r = lq(t, "", "show", path, "2")
	require.Regexp(t, `due:\s+2262-04-11T23:47:16Z \(in 86297d23h\)`, r.stdout)
}

func TestNowOutsideTheStoredYearsIsAUsageError(t *testing.T) {
	path := farTimesFile(t)
	for _, now := range []string{"9999-12-31T23:59:59Z", "1000-01-01T00:00:00Z", "2262-04-12T00:00:00Z", "1969-12-31T23:59:59Z"} {
		r := lq(t, "", "stats", path, "--now", now)
		require.Equal(t, exitUsage, r.code, "%s: %s", now, r.stderr)
		require.Contains(t, r.stderr, "--now "+now+" is outside 1970-01-01T00:00:00Z to 2262-04-11T23:47:16Z")
	}
	r := lqApp(t, func(a *app) {
		a.getenv = func(k string) string {
			if k == envNow {
				return "9999-12-31T23:59:59Z"
			}
			return ""
		}
	}, "", "jobs", path)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "$LQINSPECT_NOW 9999-12-31T23:59:59Z is outside")
	r = lq(t, "", "stats", path, "--now", "2262-04-11T23:47:16Z")
	require.Equal(t, exitOK, r.code, r.stderr)
}

// A policy with more attempts than plan lists is listed up to the limit,
// and the output says how many attempts are not listed.
func TestPlanOfAHugePolicyIsCut(t *testing.T) {
	for _, n := range []string{"9223372036854775807", "1000000000", "1001"} {
		policy := `{"max_attempts":` + n + `,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`
		r := lq(t, "", "plan", "--policy", policy)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Len(t, regexp.MustCompile(`(?m)^\d+ +(retry|gives up)`).FindAllString(r.stdout, -1), planStepLimit)
		require.Contains(t, r.stdout, "not listed: plan lists the first 1000 attempts")

		r = lq(t, "", "plan", "--json", "--policy", policy)
		require.Equal(t, exitOK, r.code, r.stderr)
		var got struct {
			MaxAttempts int   `json:"max_attempts"`
			Steps       []any `json:"steps"`
			NotListed   int   `json:"steps_not_listed"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		require.Len(t, got.Steps, planStepLimit)
		require.Equal(t, got.MaxAttempts-planStepLimit, got.NotListed)
	}
}
