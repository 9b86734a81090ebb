package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/pgtest"
)

// Reading a moved file says plainly that it was moved and where: the jobs
// shown are the file's copy from the move, no longer the queue's.
func TestReadingAMovedFileSaysWhereItWent(t *testing.T) {
	path := scheduleFile(t)
	u, _ := pgtest.FreshSchema(t)
	r := lq(t, "", "migrate", path, u)
	require.Equal(t, 0, r.code, r.stderr)
	for _, args := range [][]string{{"stats", path}, {"show", path, "1"}, {"jobs", path}} {
		r := lq(t, "", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "was moved to PostgreSQL", "%v", args)
		require.Contains(t, r.stderr, "schema \""+pgtest.Schema(t, u)+"\"", "%v", args)
	}
}
