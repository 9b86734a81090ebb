package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// olderFile is a queue file of an older schema than this build's (6), in WAL
// mode as the queue leaves its files, with a ready job (id 1), a dead one
// (id 2) and a paused queue.
func olderFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "six.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	for _, f := range []string{"0001_init.sql", "0002_due_at.sql", "0003_history.sql", "0004_schedules.sql", "0005_control.sql", "0006_progress_unique.sql"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "sqlitefile", "migrations", f))
		require.NoError(t, err)
		_, err = db.Exec(string(b))
		require.NoError(t, err, f)
	}
	_, err = db.Exec(`INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '6');
		INSERT INTO lq_jobs (id, queue, kind, state, visible_at, attempt, payload, created_at, run_at, last_error, dead_reason, finished_at)
		VALUES (1, 'default', 'send_email', 0, 100, 0, CAST('{"to":"a"}' AS BLOB), 50, 100, NULL, NULL, NULL),
		       (2, 'default', 'send_email', 3, 100, 1, CAST('{"to":"b"}' AS BLOB), 50, 100, 'smtp down', 'attempts used up', 200);
		INSERT INTO lq_queues (queue, paused_at) VALUES ('reports', 100)`)
	require.NoError(t, err)
	require.Less(t, 6, litequeue.SchemaVersion, "olderFile builds a schema older than this build's")
	return path
}

// fileVersion reads the schema version stored in a queue file.
func fileVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var v string
	require.NoError(t, db.QueryRow(`SELECT value FROM lq_meta WHERE key = 'schema_version'`).Scan(&v))
	n, err := strconv.Atoi(v)
	require.NoError(t, err)
	return n
}

// No command but upgrade migrates a file of an older schema: the writing
// ones refuse it, say why and which command migrates, and change nothing;
// the reading ones read it as it is.
func TestWritingCommandsRefuseAnOlderSchemaAndUpgradeMigrates(t *testing.T) {
	path := olderFile(t)
	before := dirState(t, filepath.Dir(path))
	for _, args := range [][]string{
		{"pause", path, "default"}, {"resume", path, "reports"}, {"requeue", path, "2"}, {"requeue", path, "--all", "--yes"},
		{"purge", path, "--dead", "--yes"}, {"cancel", path, "1"}, {"schedules", path, "pause", "nightly"},
		{"serve", path, "--addr", "127.0.0.1:0"},
	} {
		r := lq(t, "", args...)
		require.Equal(t, exitError, r.code, "%v: %s", args, r.stdout)
		require.Contains(t, r.stderr, path+": queue schema version 6, older than this lqinspect's "+strconv.Itoa(litequeue.SchemaVersion), "%v", args)
		require.Contains(t, r.stderr, "lqinspect upgrade "+path, "%v", args)
		require.Equal(t, 6, fileVersion(t, path), "%v migrated the file", args)
		after := dirState(t, filepath.Dir(path))
		for _, companion := range []string{"six.db-wal", "six.db-shm"} {
			if _, had := before[companion]; !had {
				delete(after, companion) // a reader's empty companions
			}
		}
		require.Equal(t, before, after, "%v changed the directory", args)
	}
	for _, args := range [][]string{{"stats", path}, {"jobs", path}, {"show", path, "2"}, {"dead", path}, {"schedules", path}} {
		r := lq(t, "", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
	}
	require.Equal(t, 6, fileVersion(t, path))

	r := lq(t, "", "upgrade", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "upgraded "+path+" from queue schema version 6 to "+strconv.Itoa(litequeue.SchemaVersion)+"\n", r.stdout)
	require.Equal(t, litequeue.SchemaVersion, fileVersion(t, path))
	r = lq(t, "", "upgrade", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "nothing to upgrade")

	r = lq(t, "", "requeue", path, "2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "requeued 1 dead letter\n", r.stdout)
}
