package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/pgtest"
)

func TestBackupCopiesALiveFile(t *testing.T) {
	fx := newFixture(t) // the fixture's queue stays open and running
	dst := filepath.Join(t.TempDir(), "copy.db")
	r := lq(t, "", "backup", fx.path, dst)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, dst)
	want := lq(t, "", "jobs", fx.path, "--json")
	got := lq(t, "", "jobs", dst, "--json")
	require.Equal(t, 0, got.code, got.stderr)
	require.Equal(t, want.stdout, got.stdout, "the copy lists other jobs than the live file")

	// A second backup to the same name is refused and changes nothing.
	before, err := os.ReadFile(dst)
	require.NoError(t, err)
	r = lq(t, "", "backup", fx.path, dst)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "exists")
	after, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, before, after)

	r = lq(t, "", "backup", fx.path)
	require.Equal(t, exitUsage, r.code)
}

// lqinspect backup of a PostgreSQL queue writes a queue file that
// lqinspect reads exactly as it reads the PostgreSQL queue.
func TestBackupOfAPostgreSQLQueueWritesAQueueFile(t *testing.T) {
	fx := newFixture(t)
	u, _ := pgtest.FreshSchema(t)
	file := filepath.Join(t.TempDir(), "file.db")
	require.Equal(t, 0, lq(t, "", "backup", fx.path, file).code)
	require.Equal(t, 0, lq(t, "", "migrate", file, u).code)
	require.Equal(t, 0, lq(t, "", "pause", u, "reports", "--create").code)

	dest := filepath.Join(t.TempDir(), "pg-copy.db")
	r := lq(t, "", "backup", u, dest)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "backed up postgres://")
	sameOutput(t, u, dest, []string{"jobs", "--json"}, []string{"stats", "--json"}, []string{"dead", "--json"}, []string{"show", "--json", "6"})
	require.Contains(t, lq(t, "", "stats", "--json", dest).stdout, `"paused": true`)

	r = lq(t, "", "backup", u, dest)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "exists")
	r = lq(t, "", "backup", file, u)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "lqinspect migrate")
}
