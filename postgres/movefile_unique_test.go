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

// uniqueMoveJob is a job type unique by payload while pending.
type uniqueMoveJob struct {
	N int `json:"n"`
}

func (uniqueMoveJob) Kind() string { return "unique-move" }
func (uniqueMoveJob) UniqueOptions() *litequeue.UniqueOptions {
	return &litequeue.UniqueOptions{Period: time.Hour, States: []litequeue.State{litequeue.StateReady, litequeue.StateScheduled}}
}

// A schedule of a unique job type keeps its uniqueness across a move: the
// PostgreSQL queue reports it, an application registering the same
// schedule again finds it unchanged, and its occurrences are deduplicated.
func TestMoveFileKeepsAScheduleUniqueness(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "unique.db")
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	def := litequeue.Schedule{Name: "hourly", Every: time.Hour, Job: uniqueMoveJob{N: 1}}
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, def)
	require.NoError(t, err)
	want, err := q.Schedules(ctx)
	require.NoError(t, err)
	require.NotNil(t, want[0].Unique)
	require.NoError(t, q.Close())

	u, _ := freshSchema(t)
	m, err := MoveFile(ctx, path, u)
	require.NoError(t, err)
	require.Equal(t, 1, m.Schedules)

	pq, err := Open(ctx, u, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer pq.Close()
	got, err := pq.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, want[0].Unique, got[0].Unique, "the moved schedule's uniqueness")
	c, err := pq.RegisterSchedule(ctx, def)
	require.NoError(t, err)
	require.Equal(t, litequeue.ScheduleUnchanged, c, "registering the moved schedule again changes nothing")
	for range 2 {
		_, err = pq.TriggerSchedule(ctx, "hourly")
		if err != nil {
			require.ErrorIs(t, err, litequeue.ErrDuplicate)
		}
	}
	jobs, err := pq.Jobs(ctx, litequeue.JobFilter{Kind: "unique-move"})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the second occurrence is a duplicate of the first")
}
