package litequeue

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// uniqueTick is a Tick whose type is unique by payload.
type uniqueTick struct {
	Of string `json:"of"`
}

func (uniqueTick) Kind() string                  { return "tick" }
func (uniqueTick) QueueName() string             { return "ticks" }
func (uniqueTick) UniqueOptions() *UniqueOptions { return &UniqueOptions{} }

// A queue file of schema 7 (before schedules stored their job's
// uniqueness) migrates with its schedules intact and without uniqueness;
// registering the schedule again with a unique job type is a change of
// definition (logged, in the history) that stores it.
func TestScheduleFromSchema7GetsItsUniquenessWhenRegisteredAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seven.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	for _, f := range []string{"0001_init.sql", "0002_due_at.sql", "0003_history.sql", "0004_schedules.sql", "0005_control.sql", "0006_progress_unique.sql", "0007_state_check.sql"} {
		b, err := os.ReadFile(filepath.Join("internal", "sqlitefile", "migrations", f))
		require.NoError(t, err)
		_, err = db.Exec(string(b))
		require.NoError(t, err, f)
	}
	h := setup(t, nil)
	_, err = db.Exec(`INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '7');
		INSERT INTO lq_schedules (name, cron, tz, queue, kind, payload, next_at, created_at, updated_at)
		VALUES ('nightly', '0 2 * * *', 'UTC', 'ticks', 'tick', CAST('{"of":"n"}' AS BLOB), ?, 1, 1)`, utc(2026, 1, 1, 2, 0).UnixNano())
	require.NoError(t, err)
	require.NoError(t, db.Close())

	q, err := Open(path, &h.opts)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	info := scheduleInfo(t, q, "nightly")
	require.Nil(t, info.Unique)
	require.Equal(t, utc(2026, 1, 1, 2, 0), info.NextRun.UTC())

	c, err := q.RegisterSchedule(ctx, Schedule{Name: "nightly", Cron: "0 2 * * *", Job: uniqueTick{"n"}})
	require.NoError(t, err)
	require.Equal(t, ScheduleUpdated, c, "the uniqueness is part of the definition")
	require.Equal(t, &UniqueOptions{}, scheduleInfo(t, q, "nightly").Unique)
	hist, err := q.ScheduleHistory(ctx, "nightly", 1)
	require.NoError(t, err)
	require.Equal(t, "updated", hist[0].Type)
	c, err = q.RegisterSchedule(ctx, Schedule{Name: "nightly", Cron: "0 2 * * *", Job: uniqueTick{"n"}})
	require.NoError(t, err)
	require.Equal(t, ScheduleUnchanged, c)
	c, err = q.RegisterSchedule(ctx, Schedule{Name: "nightly", Cron: "0 2 * * *", Job: Tick{"n"}})
	require.NoError(t, err)
	require.Equal(t, ScheduleUpdated, c, "dropping the uniqueness is a change too")
	require.Nil(t, scheduleInfo(t, q, "nightly").Unique)
}
