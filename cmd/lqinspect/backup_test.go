package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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

func TestBackupOfAPostgreSQLQueuePointsToPgDump(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "copy.db")
	r := lq(t, "", "backup", "postgres://app@db.internal/app", dest)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "pg_dump")
	require.NoFileExists(t, dest)
}
