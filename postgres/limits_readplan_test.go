package postgres

import (
	"context"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// TestGroupReadsReadOnlyTheirGroupsRows checks with EXPLAIN ANALYZE, with
// the plan for the parameters and the generic plan, that the reads of a
// queue's groups and of why a job waits read the rows of the groups they
// name only — beside 20,000 pending rows over 100 groups, 5,000 of them in
// one group whose count stops at its cap — never scanning lq_jobs.
func TestGroupReadsReadOnlyTheirGroupsRows(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, grp)
SELECT 'q', 'a', 0, i, i, i, '\x7b7d', CASE WHEN i % 4 = 0 THEN 'big' ELSE 'g' || (i % 100) END FROM generate_series(1, 20000) i`,
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
		most  float64
	}{
		{"next group", nextGroupSQL, []any{"q", "g5"}, 10},
		{"group head", groupHeadSQL, []any{"q", "g7"}, 10},
		{"group live, small", groupLiveSQL, []any{"q", "g7", store.GroupCountCap + 1}, 2 * 200},
		{"group live, capped", groupLiveSQL, []any{"q", "big", 1000}, 1000 + 10},
		{"group marked", groupMarkedSQL, []any{"q", "g3"}, 10},
		{"counted in group", countedGroupSQL, []any{"q", int64(50000), "g3"}, 10},
	} {
		for _, generic := range []bool{false, true} {
			plan := explainAnalyze(t, s.db, generic, s.q(c.query), c.args...)
			rows, seq := rowsRead(plan)
			require.False(t, seq, "%s (generic plan: %v) scans lq_jobs", c.name, generic)
			require.LessOrEqual(t, rows, c.most, "%s (generic plan: %v) reads %v rows of lq_jobs", c.name, generic, rows)
			t.Logf("%s (generic plan: %v): %v rows of lq_jobs read", c.name, generic, rows)
		}
	}
}
