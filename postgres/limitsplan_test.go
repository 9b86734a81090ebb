package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowPlansReadOnlyCountedRows checks with EXPLAIN ANALYZE, with the
// plan for the parameters and the generic plan, that a limited claim's
// count of what runs and the next free slot read the counted running rows
// only (lq_jobs_flow), beside 20,000 due pending rows of the queue and
// 2,000 running rows no limited claim started.
func TestFlowPlansReadOnlyCountedRows(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, grp)
SELECT 'q', 'a', 0, i, i, i, '\x7b7d', 'g' || (i % 100) FROM generate_series(1, 20000) i`,
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, state)
SELECT 'q', 'a', 0, 100000 + i, i, i, '\x7b7d', 1 FROM generate_series(1, 2000) i`,
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, state, flow, grp)
SELECT 'q', 'a', 0, 100000 + i, i, i, '\x7b7d', 1, 1, 'g' || i FROM generate_series(1, 5) i`,
		`ANALYZE lq_jobs `,
	} {
		_, err := s.db.ExecContext(ctx, s.q(q))
		require.NoError(t, err)
	}
	for _, c := range []struct {
		name  string
		query string
		args  []any
	}{
		{"count running", flowRunningSQL, []any{"q", int64(50000)}},
		{"next free", flowNextFreeSQL, []any{"q", int64(50000), []string{"a"}}},
	} {
		for _, generic := range []bool{false, true} {
			plan := explainAnalyze(t, s.db, generic, s.q(c.query), c.args...)
			rows, seq := rowsRead(plan)
			require.False(t, seq, "%s (generic plan: %v) scans lq_jobs", c.name, generic)
			require.LessOrEqual(t, rows, 10.0, "%s (generic plan: %v) reads %v rows of lq_jobs", c.name, generic, rows)
			t.Logf("%s (generic plan: %v): %v rows of lq_jobs read", c.name, generic, rows)
		}
	}
}
