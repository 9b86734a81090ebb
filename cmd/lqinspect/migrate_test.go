package main

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/pgtest"
)

func TestMigrateMovesAStoppedQueueFileOnceAndRefusesARunningOne(t *testing.T) {
	fx := newFixture(t) // its queue keeps running
	u, admin := pgtest.FreshSchema(t)

	r := lq(t, "", "migrate", fx.path, u)
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "open in another process")
	var n int
	require.NoError(t, admin.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, pgtest.Schema(t, u)).Scan(&n))
	require.Zero(t, n, "tables created by a refused migrate")

	// A consistent copy nobody has open moves: 2 ready + 2 scheduled
	// (ids 6, 7) + 1 ready (8) pending, the render job running, 3 dead,
	// the retained ping.
	copy := filepath.Join(t.TempDir(), "copy.db")
	require.Equal(t, 0, lq(t, "", "backup", fx.path, copy).code)
	r = lq(t, "", "migrate", copy, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "moved 10 jobs")
	require.Contains(t, r.stdout, "5 pending or scheduled, 1 running")
	require.Contains(t, r.stdout, "3 dead letters, 1 completed, 0 cancelled, 4 attempt records")
	require.Contains(t, r.stderr, "is marked as moving; copying its jobs")
	require.Contains(t, r.stderr, "PostgreSQL committed the copy; recording the move's end")

	// lqinspect reads the PostgreSQL queue as it reads the file.
	sameOutput(t, copy, u, []string{"jobs", "--json"}, []string{"stats", "--json"}, []string{"dead", "--json"}, []string{"show", "--json", "6"})

	r = lq(t, "", "migrate", copy, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "moved 0 jobs")
	require.Contains(t, r.stdout, "10 jobs already moved")

	r = lq(t, "", "migrate", copy)
	require.Equal(t, exitUsage, r.code)
}

// Paused queues and schedules move with the jobs: lqinspect reports the
// same stats, schedules and schedule history from PostgreSQL as from the
// file.
func TestMigrateKeepsPausedQueuesAndSchedules(t *testing.T) {
	path := scheduleFile(t)
	require.Equal(t, 0, lq(t, "", "pause", path, "reports", "--create").code)
	u, _ := pgtest.FreshSchema(t)

	r := lq(t, "", "migrate", path, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 paused queue, 3 schedules")
	sameOutput(t, path, u, []string{"stats", "--json"}, []string{"schedules", "--json"}, []string{"schedules", "--json", "history", "nightly"})

	r = lq(t, "", "migrate", path, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "0 paused queues, 0 schedules")
}

// sameOutput runs each lqinspect command on queue a and on queue b (a file
// or a postgres:// URL, after the command's name) and requires the same
// output from both.
func sameOutput(t *testing.T, a, b string, cmds ...[]string) {
	t.Helper()
	for _, args := range cmds {
		want := lq(t, "", append([]string{args[0], a}, args[1:]...)...)
		got := lq(t, "", append([]string{args[0], b}, args[1:]...)...)
		require.Equal(t, 0, want.code, want.stderr)
		require.Equal(t, 0, got.code, got.stderr)
		require.Equal(t, want.stdout, got.stdout, "lqinspect %v on %s and on %s", args, a, b)
	}
}

// Through PgBouncer in transaction mode lqinspect moves a queue file in,
// reads it as it reads the file (its read-only opens included), and
// changes it.
func TestCommandsThroughAPooler(t *testing.T) {
	b := pgtest.StartBouncer(t)
	pooled, _ := b.FreshDatabase(t)
	path := scheduleFile(t)
	// The moved file refuses writes: a copy from before the move stands in
	// for it when the same change is made to both.
	unmoved := filepath.Join(t.TempDir(), "unmoved.db")
	require.Equal(t, 0, lq(t, "", "backup", path, unmoved).code)

	r := lq(t, "", "migrate", path, pooled)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "3 schedules")
	sameOutput(t, path, pooled, []string{"jobs", "--json"}, []string{"stats", "--json"}, []string{"schedules", "--json"})

	r = lq(t, "", "schema", pooled)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout+r.stderr, "nothing to apply")

	require.Equal(t, 0, lq(t, "", "pause", unmoved, "reports", "--create").code)
	r = lq(t, "", "pause", pooled, "reports", "--create")
	require.Equal(t, 0, r.code, r.stderr)
	sameOutput(t, unmoved, pooled, []string{"stats", "--json"})
}

// After migrate the file is marked moved: every writing command refuses it
// (the application restarted on it would run the moved jobs again), read
// commands read it, and a second migrate into another schema is refused.
func TestMigratedFileRefusesWritesAndIsReadStill(t *testing.T) {
	path := scheduleFile(t)
	u, _ := pgtest.FreshSchema(t)
	r := lq(t, "", "migrate", path, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "is marked as moved")
	for _, args := range [][]string{{"pause", path, "reports"}, {"requeue", path, "--all", "--yes"}, {"schedules", path, "trigger", "nightly"}, {"cancel", path, "1"}} {
		r := lq(t, "", args...)
		require.Equal(t, exitError, r.code, "%v: %s", args, r.stdout)
		require.Contains(t, r.stderr, "the queue file was moved to PostgreSQL", "%v", args)
		require.Contains(t, r.stderr, "schema \""+pgtest.Schema(t, u)+"\"", "%v", args)
	}
	sameOutput(t, path, u, []string{"jobs", "--json"}, []string{"schedules", "--json"})

	other, _ := pgtest.FreshSchema(t)
	r = lq(t, "", "migrate", path, other)
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "would run them twice")
}

// A file holding keys PostgreSQL's text cannot store (written before
// Enqueue refused them) migrates whole: they are escaped and counted.
func TestMigrateEscapesKeysPostgreSQLCannotStore(t *testing.T) {
	fx := newFixture(t)
	path := filepath.Join(t.TempDir(), "old.db")
	require.Equal(t, 0, lq(t, "", "backup", fx.path, path).code)
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_jobs SET idem_key = CAST(x'6b0031' AS TEXT) WHERE id = 1; UPDATE lq_jobs SET idem_key = CAST(x'6bff32' AS TEXT) WHERE id = 2`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	u, _ := pgtest.FreshSchema(t)
	r := lq(t, "", "migrate", path, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "moved 10 jobs")
	require.Contains(t, r.stdout, `2 text values (keys, names, errors) held NUL bytes or invalid UTF-8`)
	r = lq(t, "", "show", u, "2", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"key": "k\\xff2"`)
}
