package litequeue

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// craftedFile is a queue file with three jobs, closed, then altered by sql
// as an attacker (or a careless tool) could.
func craftedFile(t *testing.T, alter string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crafted.db")
	q, err := Open(path, &Options{PollInterval: -1})
	require.NoError(t, err)
	for range 3 {
		_, err := q.Enqueue(context.Background(), SendEmail{To: "a"}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(alter)
	require.NoError(t, err)
	return path
}

// The recursive view stands in for lq_jobs with its columns.
const recursiveView = `DROP TABLE lq_jobs;
	CREATE VIEW lq_jobs AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
	SELECT n AS id, 'default' AS queue, 'send_email' AS kind, 0 AS state, 0 AS priority, 0 AS visible_at, 0 AS attempt,
		x'7b7d' AS payload, NULL AS idem_key, NULL AS lease, 0 AS created_at, 0 AS run_at, NULL AS attempted_at,
		NULL AS finished_at, NULL AS last_error, NULL AS dead_reason, 0 AS due_at, 0 AS snoozes, NULL AS progress,
		NULL AS progress_msg, NULL AS progress_at, NULL AS output, NULL AS unique_key, NULL AS unique_states FROM r`

// Before the queue reads a row, Open (read-only or not) checks that the
// queue's tables are tables with the columns its migrations made and
// carry no triggers, and refuses a crafted file naming the object, at
// once: a recursive view would hang every read, a trigger could delete
// every job while an admin operation reports success, or stall every write.
func TestOpenRefusesCraftedSchemasNamingTheObject(t *testing.T) {
	for name, c := range map[string]struct{ alter, want string }{
		"recursive view for lq_jobs": {recursiveView, "lq_jobs is a view, not a table"},
		"trigger that deletes every job": {`CREATE TRIGGER wipe AFTER UPDATE ON lq_jobs BEGIN DELETE FROM lq_jobs; END`,
			`trigger "wipe" on lq_jobs`},
		"slow trigger": {`CREATE TRIGGER slow BEFORE INSERT ON lq_attempts BEGIN
			SELECT count(*) FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000000) SELECT n FROM r); END`,
			`trigger "slow" on lq_attempts`},
		"trigger in another case": {`CREATE TRIGGER Wipe AFTER DELETE ON LQ_Jobs BEGIN DELETE FROM lq_jobs; END`, `trigger "Wipe" on LQ_Jobs`},
		"generated column":        {`ALTER TABLE lq_jobs ADD COLUMN big BLOB GENERATED ALWAYS AS (zeroblob(10)) VIRTUAL`, "the table lq_jobs has columns"},
		"extra column":            {`ALTER TABLE lq_queues ADD COLUMN note TEXT`, "the table lq_queues has columns"},
		"lq_meta as a view": {`DROP TABLE lq_meta; CREATE VIEW lq_meta(key, value) AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT 'format', n FROM r`,
			"lq_meta is a view, not a table"},
		"lq_meta with a generated column": {`ALTER TABLE lq_meta ADD COLUMN g BLOB AS (zeroblob(10))`, "the table lq_meta has a generated column g"},
		"missing table":                   {`DROP TABLE lq_history`, "the queue table lq_history is missing"},
	} {
		t.Run(name, func(t *testing.T) {
			path := craftedFile(t, c.alter)
			for _, ro := range []bool{true, false} {
				done := make(chan error, 1)
				go func() {
					q, err := Open(path, &Options{ReadOnly: ro, PollInterval: -1})
					if err == nil {
						q.Close()
					}
					done <- err
				}()
				select {
				case err := <-done:
					require.ErrorIs(t, err, ErrNotLitequeue, "read-only %v", ro)
					require.ErrorContains(t, err, c.want, "read-only %v", ro)
				case <-time.After(20 * time.Second):
					t.Fatalf("Open (read-only %v) of a crafted file hangs", ro)
				}
			}
		})
	}
}

// The application's own database (New) may hold its own triggers on the
// queue's tables; a view in place of one is refused there too.
func TestNewAllowsTheApplicationsTriggersButNotViews(t *testing.T) {
	path := craftedFile(t, `CREATE TABLE audit (id INTEGER); CREATE TRIGGER audit_jobs AFTER INSERT ON lq_jobs BEGIN INSERT INTO audit VALUES (NEW.id); END`)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	q, err := New(db, &Options{PollInterval: -1})
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), SendEmail{To: "b"}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())

	path = craftedFile(t, recursiveView)
	db2, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db2.Close()
	_, err = New(db2, &Options{PollInterval: -1})
	require.ErrorContains(t, err, "lq_jobs is a view, not a table")
}

// Every connection of a queue has trusted_schema off.
func TestTrustedSchemaIsOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(path, &Options{PollInterval: -1})
	require.NoError(t, err)
	got, err := q.Pragmas(context.Background())
	require.NoError(t, err)
	require.Equal(t, "0", got["trusted_schema"])
	var v int
	require.NoError(t, q.lite.DB().QueryRow(`PRAGMA trusted_schema`).Scan(&v))
	require.Zero(t, v, "the read pool")
	require.NoError(t, q.Close())

	ro, err := Open(path, &Options{ReadOnly: true, PollInterval: -1})
	require.NoError(t, err)
	got, err = ro.Pragmas(context.Background())
	require.NoError(t, err)
	require.Equal(t, "0", got["trusted_schema"])
	require.NoError(t, ro.Close())
}
