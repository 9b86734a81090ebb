package postgres

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// A job's tags, metadata and trace context, and a schedule's bounds, go
// with a Backup into the queue file and with MoveFile back into
// PostgreSQL; a listing by tag finds the jobs in each.
func TestMetadataSurvivesBackupAndMove(t *testing.T) {
	ctx := context.Background()
	u, _ := freshSchema(t)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	q, err := Open(ctx, u, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	opts := &litequeue.EnqueueOptions{Tags: []string{"red", "tenant:1"}, Metadata: map[string]string{"k": "v"},
		Trace: litequeue.TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	id, err := q.Enqueue(ctx, okJob{}, opts)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, okJob{}, nil)
	require.NoError(t, err)
	end := mock.Now().Add(48 * time.Hour)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "bounded", Cron: "@hourly", Job: okJob{}, EndAt: end, MaxRuns: 5, RunImmediately: true})
	require.NoError(t, err)

	check := func(q *litequeue.Queue, where string) {
		t.Helper()
		j, err := q.Job(ctx, id)
		require.NoError(t, err, where)
		require.Equal(t, []string{"red", "tenant:1"}, j.Tags, where)
		require.Equal(t, map[string]string{"k": "v"}, j.Metadata, where)
		require.Equal(t, opts.Trace, j.Trace, where)
		page, err := q.ListJobs(ctx, litequeue.JobQuery{Tags: []string{"tenant:1"}}, litequeue.PageRequest{})
		require.NoError(t, err, where)
		require.Len(t, page.Jobs, 1, where)
		require.Equal(t, id, page.Jobs[0].ID, where)
		ss, err := q.Schedules(ctx)
		require.NoError(t, err, where)
		require.Len(t, ss, 1, where)
		require.Equal(t, end, ss[0].EndAt.UTC(), where)
		require.Equal(t, 5, ss[0].MaxRuns, where)
		require.True(t, ss[0].RunImmediately, where)
	}
	check(q, "PostgreSQL")
	path := filepath.Join(t.TempDir(), "backup.db")
	require.NoError(t, q.Backup(ctx, path))
	fq, err := litequeue.Open(path, &litequeue.Options{ReadOnly: true})
	require.NoError(t, err)
	check(fq, "the backup file")
	require.NoError(t, fq.Close())

	u2, _ := freshSchema(t)
	_, err = MoveFile(ctx, path, u2)
	require.NoError(t, err)
	q2, err := Open(ctx, u2, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer q2.Close()
	check(q2, "moved back")
}
