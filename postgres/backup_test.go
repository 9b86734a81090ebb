package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

type okJob struct{}

func (okJob) Kind() string { return "ok" }

type blockJob struct{}

func (blockJob) Kind() string { return "block" }

// snapshot is what a queue reports of its jobs and queue-level state, as
// JSON (ScheduleInfo holds unexported parsed timing).
func snapshot(t *testing.T, q *litequeue.Queue) string {
	t.Helper()
	jobs, err := q.Jobs(context.Background(), litequeue.JobFilter{})
	require.NoError(t, err)
	var dead []litequeue.JobInfo
	for _, j := range jobs {
		if j.State == litequeue.StateDead {
			d, err := q.DeadLetter(context.Background(), j.ID)
			require.NoError(t, err)
			dead = append(dead, d)
		}
	}
	b, err := json.Marshal(map[string]any{"jobs": jobs, "dead": dead, "state": readQueueState(t, q)})
	require.NoError(t, err)
	return string(b)
}

// A PostgreSQL queue's Backup is a queue file holding every job — pending,
// scheduled, keyed, running (taken while its handler runs), completed,
// dead with its history, cancelled — the paused queue, the schedule and
// the history, exactly as PostgreSQL reports them. The copy moves back into
// PostgreSQL unchanged, and as a queue file it continues the ids.
func TestBackupWritesAConsistentQueueFileThatMovesBack(t *testing.T) {
	ctx := context.Background()
	u, _ := freshSchema(t)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	events := make(chan litequeue.Event, 64)
	q, err := Open(ctx, u, &litequeue.Options{Clock: mock, PollInterval: -1, CompletedRetention: time.Hour,
		OnEvent: func(e litequeue.Event) { events <- e }})
	require.NoError(t, err)
	defer q.Close()

	for i, o := range []*litequeue.EnqueueOptions{nil, {Delay: time.Hour}, {Key: "k1"}, {Priority: -3}} {
		_, err := q.Enqueue(ctx, moveJob{N: i}, o)
		require.NoError(t, err)
	}
	gone, err := q.Enqueue(ctx, moveJob{N: 9}, nil)
	require.NoError(t, err)
	_, err = q.Cancel(ctx, gone)
	require.NoError(t, err)
	require.NoError(t, q.Pause(ctx, "reports"))
	_, err = q.Enqueue(ctx, moveJob{N: 10}, &litequeue.EnqueueOptions{Queue: "reports"})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "hourly", Cron: "@hourly", Job: moveJob{N: 11}})
	require.NoError(t, err)

	release := make(chan struct{})
	started := make(chan struct{})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[failJob]) error {
		return litequeue.Permanent(errors.New("no such account"))
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[okJob]) error { return nil })
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[blockJob]) error {
		close(started)
		<-release
		return nil
	})
	for _, j := range []litequeue.Job{failJob{}, okJob{}, blockJob{}} {
		_, err := q.Enqueue(ctx, j, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Start(ctx))
	defer q.Stop(ctx)
	defer close(release)
	<-started
	for seen := map[litequeue.EventType]bool{}; !seen[litequeue.EventDead] || !seen[litequeue.EventSucceeded]; {
		select {
		case e := <-events:
			seen[e.Type] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("the failing and the succeeding job did not finish: %v", seen)
		}
	}
	require.NoError(t, q.FlushHistory(ctx))
	want := snapshot(t, q)
	for _, s := range []string{`"state":"running"`, `"state":"completed"`, `"state":"dead"`, `"state":"cancelled"`, `"state":"scheduled"`, `no such account"`} {
		require.Contains(t, want, s, "the queue to back up lacks a case")
	}

	path := filepath.Join(t.TempDir(), "pg-copy.db")
	require.NoError(t, q.Backup(ctx, path))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "one self-contained file, nothing left beside it")
	copied, err := litequeue.Open(path, &litequeue.Options{Clock: mock, ReadOnly: true, PollInterval: -1})
	require.NoError(t, err)
	require.JSONEq(t, want, snapshot(t, copied), "the copy reports what PostgreSQL does")
	require.NoError(t, copied.Close())

	// Never overwrites.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	require.ErrorIs(t, q.Backup(ctx, path), fs.ErrExist)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)

	// Restored into another schema, the queue is the same.
	u2, _ := freshSchema(t)
	_, err = MoveFile(ctx, path, u2)
	require.NoError(t, err)
	restored, err := Open(ctx, u2, &litequeue.Options{Clock: mock, ReadOnly: true, PollInterval: -1})
	require.NoError(t, err)
	require.JSONEq(t, want, snapshot(t, restored), "restored from the copy")
	require.NoError(t, restored.Close())

	// As a queue file of its own, the copy hands out ids after PostgreSQL's.
	last, err := q.Enqueue(ctx, moveJob{N: 12}, nil)
	require.NoError(t, err)
	_, err = q.Cancel(ctx, last) // an id handed out, then its row gone
	require.NoError(t, err)
	_, err = q.PurgeCancelled(ctx, 0)
	require.NoError(t, err)
	path2 := filepath.Join(t.TempDir(), "pg-copy2.db")
	require.NoError(t, q.Backup(ctx, path2))
	local, err := litequeue.Open(path2, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer local.Close()
	id, err := local.Enqueue(ctx, moveJob{N: 13}, nil)
	require.NoError(t, err)
	require.Greater(t, id, last)
}

func TestBackupOfPostgreSQLRefusesAMissingDirectoryAndLeavesNothing(t *testing.T) {
	u, _ := freshSchema(t)
	q, err := Open(context.Background(), u, nil)
	require.NoError(t, err)
	defer q.Close()
	dir := t.TempDir()
	err = q.Backup(context.Background(), filepath.Join(dir, "missing", "copy.db"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = q.Backup(ctx, filepath.Join(dir, "copy.db"))
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "a cancelled backup leaves no file")
}
