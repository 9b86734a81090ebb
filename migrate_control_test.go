package litequeue

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/stretchr/testify/require"
)

// A queue file of schema 3 (before live control) migrates to the current
// schema (through 0005, which rebuilds lq_jobs) with
// every job, its attempt history and its idempotency key intact, the
// AUTOINCREMENT counter carried over (no id is reused), the indexes back,
// the foreign key of lq_attempts working, and the cancelled state accepted.
func TestMigrationFromSchema3KeepsJobsHistoryAndIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	for _, f := range []string{"0001_init.sql", "0002_due_at.sql", "0003_history.sql"} {
		b, err := os.ReadFile(filepath.Join("internal", "sqlitefile", "migrations", f))
		require.NoError(t, err)
		_, err = db.Exec(string(b))
		require.NoError(t, err, f)
	}
	_, err = db.Exec(`INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '3');
		INSERT INTO lq_jobs (id, queue, kind, state, visible_at, attempt, payload, idem_key, created_at, run_at, finished_at, last_error, dead_reason)
		VALUES (1, 'default', 'send_email', 0, 100, 0, CAST('{"to":"a"}' AS BLOB), 'key-a', 50, 100, NULL, NULL, NULL),
		       (2, 'default', 'send_email', 3, 100, 2, CAST('{"to":"b"}' AS BLOB), NULL, 50, 100, 200, 'smtp down', 'attempts used up'),
		       (9, 'default', 'send_email', 0, 100, 0, CAST('{"to":"gone"}' AS BLOB), NULL, 50, 100, NULL, NULL, NULL);
		INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay)
		VALUES (2, 1, 110, 120, 'smtp down', 'retry', 5), (2, 2, 130, 140, 'smtp down', 'give_up', 0);
		DELETE FROM lq_jobs WHERE id = 9;`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	q, err := Open(path, &Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	var version string
	require.NoError(t, q.lite.DB().QueryRow(`SELECT value FROM lq_meta WHERE key = 'schema_version'`).Scan(&version))
	require.Equal(t, strconv.Itoa(SchemaVersion), version)

	a, err := q.Job(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "key-a", a.Key)
	require.JSONEq(t, `{"to":"a"}`, string(a.Payload))
	dead, err := q.DeadLetter(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, "attempts used up", dead.DeadReason)
	require.Len(t, dead.Attempts, 2, "the attempt history survives the rebuild")

	_, err = q.Enqueue(ctx, SendEmail{To: "a"}, &EnqueueOptions{Key: "key-a"})
	require.ErrorIs(t, err, ErrDuplicate, "the unique index of live keys is back")
	id, err := q.Enqueue(ctx, SendEmail{To: "new"}, &EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	require.Equal(t, int64(10), id, "ids continue after the largest ever handed out")

	n, err := q.Cancel(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = q.PurgeDead(ctx, DeadFilter{})
	require.NoError(t, err)
	var left int
	require.NoError(t, q.lite.DB().QueryRow(`SELECT count(*) FROM lq_attempts WHERE job_id = 2`).Scan(&left))
	require.Zero(t, left, "ON DELETE CASCADE works on the rebuilt tables")

	var indexes []string
	rows, err := q.lite.DB().Query(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('lq_jobs', 'lq_attempts') ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		indexes = append(indexes, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"lq_attempts_job", "lq_jobs_cancelled", "lq_jobs_finished", "lq_jobs_flow", "lq_jobs_group_live", "lq_jobs_key", "lq_jobs_kind_due", "lq_jobs_unique"}, indexes)
	var check string
	require.NoError(t, q.lite.DB().QueryRow(`PRAGMA integrity_check`).Scan(&check))
	require.Equal(t, "ok", check)
	var fk int
	require.NoError(t, q.lite.DB().QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk))
	require.Zero(t, fk)
}

// Migration 0007 rewrites lq_jobs.state's CHECK in place (no rebuild): a
// schema-6 file keeps its rows, the definition reads the new CHECK, the
// file passes integrity_check, the schema version moves (so connections
// that cached the old definition reload it), and the CHECK still refuses
// a state outside 0–5 (5: waiting, migration 13) while accepting every state the queue writes.
func TestMigrationTo7RewritesTheStateCheckInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "six.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	for _, f := range []string{"0001_init.sql", "0002_due_at.sql", "0003_history.sql", "0004_schedules.sql", "0005_control.sql", "0006_progress_unique.sql"} {
		b, err := os.ReadFile(filepath.Join("internal", "sqlitefile", "migrations", f))
		require.NoError(t, err)
		_, err = db.Exec(string(b))
		require.NoError(t, err, f)
	}
	_, err = db.Exec(`INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '6');
		INSERT INTO lq_jobs (id, queue, kind, state, visible_at, attempt, payload, created_at, run_at)
		VALUES (1, 'default', 'send_email', 0, 100, 0, CAST('{"to":"a"}' AS BLOB), 50, 100),
		       (2, 'default', 'send_email', 4, 100, 1, CAST('{"to":"b"}' AS BLOB), 50, 100)`)
	require.NoError(t, err)
	var before int64
	require.NoError(t, db.QueryRow(`PRAGMA schema_version`).Scan(&before))
	require.NoError(t, db.Close())

	q, err := Open(path, &Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	raw := q.lite.DB()
	var def string
	require.NoError(t, raw.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'lq_jobs'`).Scan(&def))
	require.Contains(t, def, "CHECK (state BETWEEN 0 AND 5)")
	require.NotContains(t, def, "state IN (")
	var after int64
	require.NoError(t, raw.QueryRow(`PRAGMA schema_version`).Scan(&after))
	require.Greater(t, after, before)
	var check string
	require.NoError(t, raw.QueryRow(`PRAGMA integrity_check`).Scan(&check))
	require.Equal(t, "ok", check)

	j, err := q.Job(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, StateReady, j.State)
	for _, bad := range []int{6, -1} {
		require.NoError(t, q.lite.Do(ctx, func(ctx context.Context, tx sqlite.Execer) error {
			_, err := tx.ExecContext(ctx, `UPDATE lq_jobs SET state = ? WHERE id = 1`, bad)
			require.ErrorContains(t, err, "CHECK constraint failed", "state %d", bad)
			return nil
		}))
	}
	n, err := q.Cancel(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}
