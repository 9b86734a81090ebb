package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// stateFile makes a stopped queue file with a paused queue, two schedules
// (one paused, one that enqueued a job and was triggered by hand) and a
// minute of history, all at the mock clock's t0.
func stateFile(t *testing.T) (string, *clock.Mock) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "every-5m", Every: 5 * time.Minute, Job: moveJob{N: 1},
		Missed: litequeue.MissedCatchUp, CatchUp: 3})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "nightly", Cron: "30 2 * * *", TimeZone: "Europe/Berlin", Job: moveJob{N: 2}})
	require.NoError(t, err)
	require.NoError(t, q.PauseSchedule(ctx, "nightly"))
	mock.Add(time.Minute)
	_, err = q.TriggerSchedule(ctx, "every-5m")
	require.NoError(t, err)
	require.NoError(t, q.Pause(ctx, "reports"))
	_, err = q.Enqueue(ctx, moveJob{N: 3}, &litequeue.EnqueueOptions{Queue: "reports"})
	require.NoError(t, err)
	require.NoError(t, q.FlushHistory(ctx))
	require.NoError(t, q.Close())
	return path, mock
}

// queueState is what a queue reports of its queue-level state.
type queueState struct {
	Paused    map[string]time.Time
	Schedules []litequeue.ScheduleInfo
	History   map[string][]litequeue.ScheduleEvent
	Counts    []litequeue.HistoryPoint
}

func readQueueState(t *testing.T, q *litequeue.Queue) queueState {
	t.Helper()
	ctx := context.Background()
	var st queueState
	var err error
	st.Paused, err = q.PausedQueues(ctx)
	require.NoError(t, err)
	st.Schedules, err = q.Schedules(ctx)
	require.NoError(t, err)
	st.History = map[string][]litequeue.ScheduleEvent{}
	for _, s := range st.Schedules {
		st.History[s.Name], err = q.ScheduleHistory(ctx, s.Name, 0)
		require.NoError(t, err)
	}
	st.Counts, err = q.History(ctx, "", time.Time{})
	require.NoError(t, err)
	return st
}

func TestMoveFileKeepsPausedQueuesSchedulesAndHistory(t *testing.T) {
	path, mock := stateFile(t)
	ctx := context.Background()
	src, err := litequeue.Open(path, &litequeue.Options{Clock: mock, ReadOnly: true, PollInterval: -1})
	require.NoError(t, err)
	want := readQueueState(t, src)
	require.NoError(t, src.Close())
	require.Len(t, want.Paused, 1)
	require.Len(t, want.Schedules, 2)
	require.NotEmpty(t, want.Counts)

	u, _ := freshSchema(t)
	m, err := MoveFile(ctx, path, u)
	require.NoError(t, err)
	require.Equal(t, 1, m.PausedQueues)
	require.Equal(t, 2, m.Schedules)
	require.Equal(t, len(want.Counts), m.History)

	q, err := Open(ctx, u, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	got := readQueueState(t, q)
	wantJSON, err := json.Marshal(want)
	require.NoError(t, err)
	gotJSON, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(wantJSON), string(gotJSON), "the PostgreSQL queue reports the file's pauses, schedules and history")
	require.NoError(t, q.Close())

	// On PostgreSQL the paused queue's job is not claimed, and the
	// schedule enqueues its occurrences once the clock passes them.
	q, err = Open(ctx, u, &litequeue.Options{Clock: mock, PollInterval: -1,
		Queues: []litequeue.QueueConfig{litequeue.NewQueueConfig(litequeue.DefaultQueue), litequeue.NewQueueConfig("reports")}})
	require.NoError(t, err)
	defer q.Close()
	ran := make(chan int, 16)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[moveJob]) error {
		ran <- d.Job.N
		return nil
	})
	require.NoError(t, q.Start(ctx))
	deadline := time.After(10 * time.Second)
	for runs := 0; runs < 2; {
		select {
		case n := <-ran:
			require.Equal(t, 1, n, "a job of the paused queue ran")
			runs++ // the trigger's job, then an occurrence
		case <-time.After(20 * time.Millisecond):
			mock.Add(time.Minute)
		case <-deadline:
			t.Fatalf("the moved schedule did not fire on PostgreSQL (%d runs)", runs)
		}
	}
	require.NoError(t, q.Stop(ctx))
	for len(ran) > 0 {
		require.Equal(t, 1, <-ran, "a job of the paused queue ran")
	}
	reports, err := q.Jobs(ctx, litequeue.JobFilter{Queue: "reports"})
	require.NoError(t, err)
	require.Len(t, reports, 1)
	require.Equal(t, litequeue.StateReady, reports[0].State)

	// A re-run moves no state again: the resumed queue stays resumed.
	require.NoError(t, q.Resume(ctx, "reports"))
	m, err = MoveFile(ctx, path, u)
	require.NoError(t, err)
	require.Zero(t, m.PausedQueues+m.Schedules+m.History+m.Jobs(), "re-run: %+v", m)
	paused, err := q.PausedQueues(ctx)
	require.NoError(t, err)
	require.Empty(t, paused)
}

func TestMoveFileRefusesAScheduleTheDatabaseAlreadyHas(t *testing.T) {
	path, mock := stateFile(t)
	ctx := context.Background()
	u, _ := freshSchema(t)
	q, err := Open(ctx, u, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "nightly", Cron: "0 3 * * *", Job: moveJob{N: 9}})
	require.NoError(t, err)

	_, err = MoveFile(ctx, path, u)
	require.ErrorContains(t, err, `schedule "nightly" is in both`)
	jobs, err := q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, jobs, "nothing copied")
	paused, err := q.PausedQueues(ctx)
	require.NoError(t, err)
	require.Empty(t, paused, "nothing copied")

	// Removed from PostgreSQL, the file's schedule moves.
	require.NoError(t, q.RemoveSchedule(ctx, "nightly"))
	m, err := MoveFile(ctx, path, u)
	require.NoError(t, err)
	require.Equal(t, 2, m.Schedules)
}

// A file of schema 3 (before schedules, live control, progress and
// uniqueness) moves without being migrated: its jobs, their attempt
// history and its dashboard history. The move changes nothing in it but its
// mark (lq_meta).
func TestMoveFileReadsAFileOfAnOlderSchemaWithoutMigratingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for _, f := range []string{"0001_init.sql", "0002_due_at.sql", "0003_history.sql"} {
		b, err := os.ReadFile(filepath.Join("..", "internal", "sqlitefile", "migrations", f))
		require.NoError(t, err)
		_, err = db.Exec(string(b))
		require.NoError(t, err, f)
	}
	_, err = db.Exec(`INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '3');
		INSERT INTO lq_jobs (id, queue, kind, state, visible_at, attempt, payload, idem_key, created_at, run_at, finished_at, last_error, dead_reason, due_at)
		VALUES (1, 'default', 'move', 0, 100, 0, CAST('{"n":1}' AS BLOB), 'key-a', 50, 100, NULL, NULL, NULL, NULL),
		       (2, 'default', 'move', 3, 100, 2, CAST('{"n":2}' AS BLOB), NULL, 50, 100, 200, 'smtp down', 'attempts used up', 90);
		INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay)
		VALUES (2, 1, 110, 120, 'smtp down', 'retry', 5), (2, 2, 130, 140, 'smtp down', 'give_up', 0);
		INSERT INTO lq_history (queue, minute, enqueued, dead) VALUES ('default', 7, 2, 1);`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before := fileRows(t, path)

	u, _ := freshSchema(t)
	ctx := context.Background()
	m, err := MoveFile(ctx, path, u)
	require.NoError(t, err)
	require.Equal(t, Moved{Pending: 1, Dead: 1, Attempts: 2, History: 1, Schema: m.Schema, LastJobID: 2}, m)
	after := fileRows(t, path)
	require.Equal(t, "3", after["lq_meta:schema_version"], "the file is not migrated")
	require.Equal(t, "litequeue (moved to PostgreSQL)", after["lq_meta:format"], "the file is marked moved")
	for k, v := range before {
		if !strings.HasPrefix(k, "lq_meta:") {
			require.Equal(t, v, after[k], "%s changed", k)
		}
	}
	require.Len(t, after, len(before)+4, "the mark's four rows are all that was added")
	_, err = litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.ErrorIs(t, err, litequeue.ErrMoved)

	q, err := Open(ctx, u, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	dead, err := q.DeadLetter(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, "attempts used up", dead.DeadReason)
	require.Len(t, dead.Attempts, 2)
	job, err := q.Job(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "key-a", job.Key)
	hist, err := q.History(ctx, "default", time.Unix(0, 0))
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.True(t, strings.Contains(string(job.Payload), `"n":1`))
}

// A role granted only the tables' rows may not move the job id sequence
// past the file's ids (new jobs would collide with the moved ones): the move
// says what to grant and copies nothing; granted the sequence, it moves.
func TestMoveFileAsARoleWithoutTheSequenceSaysWhatToGrant(t *testing.T) {
	ctx := context.Background()
	path, live, _ := queueFile(t)
	u, admin := freshSchema(t)
	schema := schemaOf(t, u)
	role, ru := newRole(t, admin, u, schema)
	ddl, err := MigrationSQL(0)
	require.NoError(t, err)
	applyMigrationSQL(t, admin, schema, ddl)
	_, err = admin.Exec("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + quoteIdent(schema) + " TO " + quoteIdent(role))
	require.NoError(t, err)

	_, err = MoveFile(ctx, path, ru)
	require.ErrorContains(t, err, "GRANT SELECT, UPDATE ON SEQUENCE "+schema+".lq_jobs_id_seq TO "+role)
	require.ErrorContains(t, err, "nothing was copied")
	var n int
	require.NoError(t, admin.QueryRow(`SELECT count(*) FROM `+quoteIdent(schema)+`.lq_jobs`).Scan(&n))
	require.Zero(t, n)

	_, err = admin.Exec("GRANT SELECT, UPDATE ON SEQUENCE " + quoteIdent(schema) + ".lq_jobs_id_seq TO " + quoteIdent(role))
	require.NoError(t, err)
	m, err := MoveFile(ctx, path, ru)
	require.NoError(t, err)
	require.Equal(t, len(live), m.Pending)
	q, err := Open(ctx, ru, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	id, err := q.Enqueue(ctx, moveJob{N: 99}, nil)
	require.NoError(t, err, "a new job after the moved ones")
	require.Greater(t, id, m.LastJobID)
}

// fileRows reads every row of every table of a queue file, as text keyed
// by table and first column (lq_meta:format, lq_jobs:1, ...).
func fileRows(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string]string{}
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM ` + table)
		require.NoError(t, err)
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			var rest []string
			for _, v := range vals[1:] {
				rest = append(rest, fmt.Sprint(v))
			}
			out[table+":"+fmt.Sprint(vals[0])] = strings.Join(rest, "|")
		}
		rows.Close()
	}
	return out
}
