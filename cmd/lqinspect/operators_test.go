package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests of the operator items of issue 37, each through run(args…).

func TestStatsQueueShowsOneQueue(t *testing.T) {
	fx := newFixture(t)
	for _, args := range [][]string{
		{"stats", "--queue", "imports", fx.path},
		{"stats", fx.path, "--queue", "imports"},
		{"--queue", "imports", "stats", fx.path},
		{"stats", "--queue=imports", fx.path},
	} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr)
		require.Contains(t, r.stdout, "imports ")
		require.NotContains(t, r.stdout, "default")
		require.NotContains(t, r.stdout, "media")
	}

	// A queue no job names is an error with the queue it may have meant.
	r := lq(t, "", "stats", fx.path, "--queue", "imprts")
	require.Equal(t, exitError, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, `no queue "imprts"`)
	require.Contains(t, r.stderr, `did you mean "imports"?`)

	// A flag of other commands is not answered with a command it resembles.
	r = lq(t, "", "plan", "--queue", "x")
	require.Equal(t, exitUsage, r.code)
	require.NotContains(t, r.stderr, "did you mean the command")
	require.Contains(t, r.stderr, "--queue is a flag of other commands, not of plan")
}
