package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// fileCommands are invocations of every command that opens FILE, read-only
// and mutating.
func fileCommands(path string) [][]string {
	return [][]string{
		{"stats", path}, {"jobs", path}, {"show", path, "1"}, {"dead", path},
		{"requeue", path, "1"}, {"purge", path, "--dead", "--yes"}, {"cancel", path, "1"},
	}
}

// dirState is every file of a directory with its sha256.
func dirState(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][32]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}

func TestMissingFileIsAnErrorAndIsNotCreated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing.db")
	for _, args := range fileCommands(path) {
		r := lq(t, "", args...)
		require.Equal(t, 1, r.code, "%v", args)
		require.Contains(t, r.stderr, path+": no such file", "%v", args)
		require.NoFileExists(t, path)
		require.Empty(t, dirState(t, dir), "%v created files", args)
	}
}

func TestFilesThatAreNotQueueFilesAreNamedAndLeftUnchanged(t *testing.T) {
	dir := t.TempDir()

	notSQLite := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notSQLite, []byte("these are not the jobs you are looking for\n"), 0o644))

	foreign := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", foreign)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	// A SQLite file without tables, as an application may leave one.
	empty := filepath.Join(dir, "empty.db")
	db, err = sql.Open("sqlite", empty)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE t (x); DROP TABLE t`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	newer := filepath.Join(dir, "newer.db")
	q, err := litequeue.Open(newer, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	db, err = sql.Open("sqlite", newer)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_meta SET value = '99' WHERE key = 'schema_version'`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	for _, tc := range []struct {
		path, want string
		wal        bool // a WAL-mode file: a reader may create its empty -wal and -shm companions
	}{
		{notSQLite, "not a SQLite database", false},
		{foreign, "a SQLite database but not a litequeue queue file", false},
		{empty, "a SQLite database but not a litequeue queue file", false},
		{newer, "written by a newer litequeue schema than this lqinspect knows", true},
	} {
		before := dirState(t, dir)
		for _, args := range fileCommands(tc.path) {
			r := lq(t, "", args...)
			require.Equal(t, 1, r.code, "%v: %s", args, r.stderr)
			require.Contains(t, r.stderr, tc.path+": "+tc.want, "%v", args)
			require.Contains(t, r.stderr, "left unchanged", "%v", args)
			after := dirState(t, dir)
			if tc.wal {
				if sum, ok := after[filepath.Base(tc.path)+"-wal"]; ok {
					require.Equal(t, sha256.Sum256(nil), sum, "%v wrote to the WAL", args)
				}
				delete(after, filepath.Base(tc.path)+"-wal")
				delete(after, filepath.Base(tc.path)+"-shm")
			}
			require.Equal(t, before, after, "%v changed the directory", args)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	fx := newFixture(t)
	policy := `{"max_attempts":2}`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"stats"}, "want one FILE, got 0 arguments"},
		{[]string{"stats", fx.path, "other.db"}, "want one FILE, got 2 arguments"},
		{[]string{"stats", fx.path, "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"jobs", fx.path, "--state", "ready,bogus"}, `unknown state "bogus" in --state; use one or more of ready, scheduled, running, completed, dead`},
		{[]string{"jobs", fx.path, "--order", "oldest"}, `unknown --order "oldest"`},
		{[]string{"jobs", fx.path, "--limit", "-1"}, "--limit -1 is negative"},
		{[]string{"jobs", fx.path, "--offset", "-1"}, "--offset -1 is negative"},
		{[]string{"jobs", fx.path, "--limit", "ten"}, `invalid value "ten" for flag -limit`},
		{[]string{"jobs", fx.path, "--now", "yesterday"}, `--now "yesterday" is not an RFC 3339 time`},
		{[]string{"show", fx.path}, "want FILE and one job ID"},
		{[]string{"show", fx.path, "abc"}, `"abc" is not a job id`},
		{[]string{"show", fx.path, "-3"}, "flag provided but not defined: -3"},
		{[]string{"requeue", fx.path}, "give the IDs of dead letters to requeue, or --all"},
		{[]string{"requeue", fx.path, "3", "--all"}, "give job IDs or --all, not both"},
		{[]string{"requeue", fx.path, "3", "--queue", "imports"}, "--queue and --kind narrow --all"},
		{[]string{"requeue"}, "missing FILE"},
		{[]string{"cancel", fx.path}, "want FILE and at least one job ID"},
		{[]string{"cancel", fx.path, "1", "x"}, `"x" is not a job id`},
		{[]string{"purge", fx.path, "--yes"}, "give exactly one of --dead, --completed and --cancelled"},
		{[]string{"purge", fx.path, "--dead", "--completed", "--yes"}, "give exactly one of --dead, --completed and --cancelled"},
		{[]string{"purge", fx.path, "--completed", "--queue", "imports", "--yes"}, "--completed and --cancelled take only --older-than"},
		{[]string{"purge", fx.path, "--dead", "--older-than", "-1h", "--yes"}, "--older-than -1h0m0s is negative"},
		{[]string{"purge", fx.path, "--dead"}, "stdin is not a terminal to confirm on; pass --yes"},
		{[]string{"plan"}, "give exactly one of --policy and --policy-file"},
		{[]string{"plan", "--policy", policy, "--policy-file", "p.json"}, "give exactly one of --policy and --policy-file"},
		{[]string{"plan", "--policy", policy, "extra"}, "plan takes no arguments"},
	} {
		r := lq(t, "", tc.args...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
		require.Empty(t, r.stdout, "%v", tc.args)
	}
}

func TestHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"help", "jobs"}, {"jobs", "-h"}, {"purge", "--help"}, {"plan", "-h"}} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v", args)
		require.Contains(t, r.stdout+r.stderr, "Usage", "%v", args)
	}
	code := run([]string{"help"}, nil, new(nopWriter), new(nopWriter))
	require.Equal(t, 0, code)
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func TestUnknownIDIsAnError(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", fx.path, "99"}, "no job with id 99"},
		{[]string{"requeue", fx.path, "99"}, "lqinspect requeue: requeue job 99: job not found"},
		{[]string{"cancel", fx.path, "99"}, "lqinspect cancel: cancel job 99: job not found"},
		{[]string{"purge", fx.path, "--dead", "--yes", "99"}, "job 99"},
	} {
		r := lq(t, "", tc.args...)
		require.Equal(t, 1, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
		require.NotContains(t, r.stderr, "litequeue:", "%v: the command's name is the prefix", tc.args)
	}
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateDead, 4: litequeue.StateDead, 5: litequeue.StateDead})
}

// A queue with no jobs today is not an error: a monitoring script gets an
// empty result and exit 0; stderr notes the queues the file has, in case
// of a typo.
func TestQueueWithoutJobsIsAnEmptyResult(t *testing.T) {
	fx := newFixture(t)
	note := `note: no queue "nope": no job, schedule or pause names it (queues: "default", "imports", "media")`
	for _, tc := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"dead", fx.path, "--queue", "nope", "--json"}, "[]\n"},
		{[]string{"jobs", fx.path, "--queue", "nope", "--json"}, "[]\n"},
		{[]string{"dead", fx.path, "--queue", "nope"}, "no dead letters\n"},
	} {
		r := lq(t, "", tc.args...)
		require.Equal(t, 0, r.code, "%v: %s", tc.args, r.stderr)
		require.Equal(t, tc.stdout, r.stdout, "%v", tc.args)
		require.Contains(t, r.stderr, note, "%v", tc.args)
	}
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateDead, 4: litequeue.StateDead, 5: litequeue.StateDead})
}

// Typos and misplaced words are understood or answered.
func TestCommandLineForgivesOrderAndAnswersTypos(t *testing.T) {
	fx := newFixture(t)
	want := lq(t, "", "stats", fx.path, "--json")
	require.Equal(t, 0, want.code, want.stderr)
	for _, args := range [][]string{
		{fx.path, "stats", "--json"},
		{"--json", "stats", fx.path},
		{"--json", fx.path, "stats"},
		{"--now", fixtureNow.Format(time.RFC3339), "--json", "stats", fx.path},
	} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, want.stdout, r.stdout, "%v", args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stat", fx.path}, `unknown command "stat"; did you mean "stats"?`},
		{[]string{fx.path, "stat"}, `unknown command "stat"; did you mean "stats"?`},
		{[]string{"--stat", fx.path}, `--stat is not a flag; did you mean the command "stats"?`},
		{[]string{"deads", fx.path}, `did you mean "dead"?`},
		{[]string{"stats", fx.path, "--jsn"}, "did you mean --json?"},
		{[]string{"jobs", fx.path, "--stat", "dead"}, "did you mean --state?"},
	} {
		r := lq(t, "", tc.args...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

// --older-than takes days as well as Go durations.
func TestOlderThanTakesDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute, "0": 0} {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"d", "7days", "1.5d", "-1d", "x"} {
		_, err := parseDuration(in)
		require.Error(t, err, in)
	}
	fx := newFixture(t)
	r := lq(t, "", "purge", fx.path, "--dead", "--yes", "--older-than", "1d", "--now", fixtureNow.Add(25*time.Hour).Format(time.RFC3339))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "purged 3 dead letters\n", r.stdout)
}

// holdWriteLock takes the write lock of the file at path on another
// connection until the test ends.
func holdWriteLock(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := conn.ExecContext(context.Background(), "ROLLBACK")
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		require.NoError(t, db.Close())
	})
}

func TestMutatingCommandsOnALockedFileFailAfterTheBusyTimeoutWithoutChanges(t *testing.T) {
	fx := newFixture(t)
	t.Run("locked", func(t *testing.T) {
		holdWriteLock(t, fx.path)
		for _, args := range [][]string{
			{"requeue", fx.path, "3", "4"},
			{"requeue", fx.path, "--all", "--yes"},
			{"cancel", fx.path, "1", "2"},
			{"purge", fx.path, "--dead", "--yes"},
			{"purge", fx.path, "--completed", "--yes"},
		} {
			start := time.Now()
			r := lq(t, "", append(args, "--busy-timeout", "100ms")...)
			require.Equal(t, 1, r.code, "%v: %s", args, r.stderr)
			require.Contains(t, r.stderr, "another process held the write lock for the whole --busy-timeout (100ms); nothing was changed", "%v", args)
			require.Less(t, time.Since(start), 5*time.Second, "%v", args)
		}
	})
	// The lock is released: nothing the commands tried happens later.
	requireStates(t, fx.path, map[int64]litequeue.State{
		1: litequeue.StateReady, 2: litequeue.StateReady, 3: litequeue.StateDead, 4: litequeue.StateDead,
		5: litequeue.StateDead, 10: litequeue.StateCompleted,
	})
	r := lq(t, "", "requeue", fx.path, "3", "--busy-timeout", "100ms")
	require.Equal(t, 0, r.code, r.stderr)
}
