package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// craftedQueueFile is a queue file with three dead letters, altered by sql
// as a file from elsewhere may be.
func craftedQueueFile(t *testing.T, alter string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crafted.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	for range 3 {
		_, err := q.Enqueue(context.Background(), SendEmail{To: "a"}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE lq_jobs SET state = 3, attempt = 1, finished_at = 1, last_error = 'x', dead_reason = 'permanent error'`)
	require.NoError(t, err)
	_, err = db.Exec(alter)
	require.NoError(t, err)
	return path
}

// Every command refuses a crafted file at once, naming the object: a
// recursive view in place of lq_jobs hung stats; a trigger that deletes
// every job let requeue --all report success; a slow trigger was reported
// as another process holding the write lock.
func TestCraftedSchemasAreRefusedByName(t *testing.T) {
	for name, c := range map[string]struct {
		alter string
		args  []string
		want  string
	}{
		"recursive view": {`DROP TABLE lq_jobs; CREATE VIEW lq_jobs AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
			SELECT n AS id, 'default' AS queue, 'k' AS kind, 3 AS state, 0 AS priority, 0 AS visible_at, 1 AS attempt, x'7b7d' AS payload,
			NULL AS idem_key, NULL AS lease, 0 AS created_at, 0 AS run_at, NULL AS attempted_at, 1 AS finished_at, 'x' AS last_error,
			'permanent error' AS dead_reason, 0 AS due_at, 0 AS snoozes, NULL AS progress, NULL AS progress_msg, NULL AS progress_at,
			NULL AS output, NULL AS unique_key, NULL AS unique_states FROM r`, []string{"stats"}, "lq_jobs is a view, not a table"},
		"trigger that deletes every job": {`CREATE TRIGGER wipe AFTER UPDATE ON lq_jobs BEGIN DELETE FROM lq_jobs; END`,
			[]string{"requeue", "--all", "--yes"}, `trigger "wipe" on lq_jobs`},
		"slow trigger": {`CREATE TRIGGER slow AFTER UPDATE ON lq_jobs BEGIN
			SELECT count(*) FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000000000) SELECT n FROM r); END`,
			[]string{"requeue", "--all", "--yes", "--busy-timeout", "2s"}, `trigger "slow" on lq_jobs`},
	} {
		t.Run(name, func(t *testing.T) {
			path := craftedQueueFile(t, c.alter)
			done := make(chan result, 1)
			go func() { done <- lq(t, "", append(append([]string{}, c.args[0], path), c.args[1:]...)...) }()
			select {
			case r := <-done:
				require.Equal(t, exitError, r.code, "%v: %s", c.args, r.stdout)
				require.Contains(t, r.stderr, c.want)
				require.Contains(t, r.stderr, "not a litequeue queue file")
			case <-time.After(30 * time.Second):
				t.Fatalf("%v hangs on the crafted file", c.args)
			}
		})
	}
}
