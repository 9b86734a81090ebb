package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// tagFile makes a queue file with jobs 1 (tags a, b; metadata and a trace
// context), 2 (tag a), 3 (no tags) and 4 (tag b).
func tagFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	mock := clock.NewMock()
	mock.Set(t0)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	ctx := context.Background()
	for _, o := range []*litequeue.EnqueueOptions{
		{Tags: []string{"a", "b"}, Metadata: map[string]string{"tenant": "42", "request": "r-7"},
			Trace: litequeue.TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{Tags: []string{"a"}},
		nil,
		{Tags: []string{"b"}},
	} {
		_, err := q.Enqueue(ctx, SendEmail{To: "x@example.com"}, o)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	return path
}

func TestJobsByTag(t *testing.T) {
	path := tagFile(t)
	ids := func(out string) []string {
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			got = append(got, strings.Fields(line)[0])
		}
		return got
	}
	r := lq(t, "", "jobs", path, "--tag", "a")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, []string{"2", "1"}, ids(r.stdout))
	r = lq(t, "", "jobs", path, "--tag", "a,b")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, []string{"1"}, ids(r.stdout), "every tag must match")
	r = lq(t, "", "jobs", path, "--tag", "b", "--limit", "1")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, []string{"4"}, ids(r.stdout))
	require.Contains(t, r.stderr, "more match")
	r = lq(t, "", "jobs", path, "--tag", "b", "--limit", "1", "--offset", "1")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, []string{"1"}, ids(r.stdout))
	r = lq(t, "", "jobs", path, "--tag", "nope")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "no jobs")
	r = lq(t, "", "jobs", path, "--tag", "a", "--order", "next-due")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "newest first")
}

func TestShowPrintsMetadata(t *testing.T) {
	path := tagFile(t)
	r := lq(t, "", "show", path, "1")
	require.Zero(t, r.code, r.stderr)
	require.Regexp(t, `tags:\s+a, b\n`, r.stdout)
	require.Regexp(t, `metadata:\s+request=r-7\nmetadata:\s+tenant=42\n`, r.stdout)
	require.Regexp(t, `traceparent:\s+00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n`, r.stdout)
	r = lq(t, "", "show", path, "3")
	require.Zero(t, r.code, r.stderr)
	require.NotContains(t, r.stdout, "tags:")
	require.NotContains(t, r.stdout, "metadata:")
	r = lq(t, "", "show", path, "1", "--json")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, `"tags": [`)
	require.Contains(t, r.stdout, `"tenant": "42"`)
}

func TestSchedulesShowsAnEndedSchedule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	mock := clock.NewMock()
	mock.Set(t0)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: "over", Cron: "@hourly", Job: SendEmail{}, EndAt: t0.Add(-time.Hour)})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: "bounded", Cron: "@hourly", Job: SendEmail{}, MaxRuns: 3})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	r := lq(t, "", "schedules", path)
	require.Zero(t, r.code, r.stderr)
	require.Regexp(t, `over\s+@hourly\s+\S+\s+ended\s+-`, r.stdout)
	require.Regexp(t, `bounded\s+@hourly\s+\S+\s+active`, r.stdout)
	r = lq(t, "", "schedules", path, "--json")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, `"ended": true`)
	require.Contains(t, r.stdout, `"max_runs": 3`)
	require.Contains(t, r.stdout, `"end_at": "2025-12-31T23:00:00Z"`)
}
