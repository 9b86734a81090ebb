package litequeue

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPragmasOverrideQueueDefaults(t *testing.T) {
	for _, tc := range []struct {
		durability Durability
		pragmas    []string
		sync, busy string
	}{
		{DurabilityFull, nil, "2", "5000"},
		{DurabilityProcess, nil, "1", "5000"},
		{DurabilityFull, []string{"synchronous(NORMAL)"}, "1", "5000"},
		{DurabilityFull, []string{"synchronous = OFF"}, "0", "5000"},
		{DurabilityProcess, []string{"SYNCHRONOUS(extra)", "busy_timeout(250)"}, "3", "250"},
	} {
		q, err := Open(filepath.Join(t.TempDir(), "q.db"), &Options{Durability: tc.durability, Pragmas: tc.pragmas})
		require.NoError(t, err)
		got, err := q.Pragmas(context.Background())
		require.NoError(t, err)
		require.Equal(t, "wal", got["journal_mode"], tc.pragmas)
		require.Equal(t, tc.sync, got["synchronous"], tc.pragmas)
		require.Equal(t, tc.busy, got["busy_timeout"], tc.pragmas)
		require.Equal(t, "1", got["foreign_keys"], tc.pragmas)
		require.NoError(t, q.Close())
	}
}
