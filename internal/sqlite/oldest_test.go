package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The oldest ready row is found behind more lapsed running rows than the
// first pass reads of its range, by QueueSummaries and Stats, and a range
// that cannot hold an older one is not read past its first rows.
func TestOldestReadyBehindLapsedRunningRows(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		otherDue  int64 // the due time of kind b's ready row
		wantOfB   bool
		wantDueAt int64
	}{
		{"behind the running rows", 1000, false, 500},
		{"in another range, older", 50, true, 50},
		{"a tie goes to the lower id", 500, false, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "queue.db")
			s, err := Open(path, Options{BusyTimeout: 5 * time.Second, Synchronous: "FULL", Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, db.Close()) })
			insert := func(kind string, state int, visible int64) int64 {
				res, err := db.ExecContext(ctx, `INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, lease, created_at, run_at)
					VALUES ('q', ?, ?, 0, ?, ?, CAST('{}' AS BLOB), ?, 0, 0)`, kind, state, visible, state, map[bool]any{true: 7, false: nil}[state == 1])
				require.NoError(t, err)
				id, err := res.LastInsertId()
				require.NoError(t, err)
				return id
			}
			for i := range 3 * oldestFirstRows {
				insert("a", 1, int64(100+i)) // running, lease lapsed
			}
			behind := insert("a", 0, 500)
			other := insert("b", 0, c.otherDue)
			for range 20 {
				insert("c", 0, 5000)
			}
			_, err = db.ExecContext(ctx, `DELETE FROM lq_counts; INSERT INTO lq_counts (queue, state, due, n)
				SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*) FROM lq_jobs GROUP BY 1, 2, 3`)
			require.NoError(t, err)
			sums, err := s.Summaries(ctx, 10_000, 10) // the count stops at 10: the search runs
			require.NoError(t, err)
			require.Len(t, sums, 1)
			want := behind
			if c.wantOfB {
				want = other
			}
			require.True(t, sums[0].LiveCapped)
			require.Equal(t, want, sums[0].OldestReadyID)
			require.Equal(t, c.wantDueAt, sums[0].OldestReadyAt)

			// Stats finds it the same way.
			st, err := s.Stats(ctx, 10_000)
			require.NoError(t, err)
			require.Len(t, st, 1)
			require.Equal(t, c.wantDueAt, st[0].OldestReadySince)
			require.Equal(t, 22, st[0].Ready)
			require.Equal(t, 3*oldestFirstRows, st[0].Running)
		})
	}
}
