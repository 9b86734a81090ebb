package main

import (
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
	// (ids 6, 7) + 1 ready (8) pending, the render job running, 3 dead.
	copy := filepath.Join(t.TempDir(), "copy.db")
	require.Equal(t, 0, lq(t, "", "backup", fx.path, copy).code)
	r = lq(t, "", "migrate", copy, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "moved 9 jobs")
	require.Contains(t, r.stdout, "5 pending or scheduled, 1 running")
	require.Contains(t, r.stdout, "3 dead letters, 4 attempt records")

	r = lq(t, "", "migrate", copy, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "moved 0 jobs")
	require.Contains(t, r.stdout, "9 already moved")

	r = lq(t, "", "migrate", copy)
	require.Equal(t, exitUsage, r.code)
}
