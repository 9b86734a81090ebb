package postgres

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowPlansReadOnlyCountedRows checks with EXPLAIN ANALYZE, with the
// plan for the parameters and the generic plan, that a limited claim's
// count of what runs and the next free slot read the counted running rows
// only (lq_jobs_flow), beside 20,000 due pending rows of the queue and
// 2,000 running rows no limited claim started; that the priority seeks read
// a row each; and that a page of a group-limited claim's due rows (plain
// and ordered) reads about the page, the saturated groups' rows left out
// inside the server (hashed), with no scan of the table.
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
	// Pages of 50 due rows with 10 of the 100 groups saturated: the page
	// and the rows of the saturated groups met on the way (about a tenth
	// more), after a keyset bound in the middle of the range too.
	saturated := []string{"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9"}
	minKey := int64(math.MinInt64)
	for _, c := range []struct {
		name  string
		query string
		args  []any
		most  float64
	}{
		{"priorities", flowPrioritiesSQL, []any{"q"}, 2},
		{"due page", dueGroupSQL, []any{"q", int64(0), "a", int64(50000), saturated, minKey, minKey, 50}, 60},
		{"due page after a row", dueGroupSQL, []any{"q", int64(0), "a", int64(50000), saturated, int64(10000), int64(0), 50}, 60},
		// and one seek of lq_jobs_group_live per row kept (its group's first live row)
		{"ordered due page", dueOrderedSQL, []any{"q", int64(0), "a", int64(50000), saturated, minKey, minKey, 50}, 120},
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

// TestFlowPlanClaimChosenSeeksItsRows checks with EXPLAIN ANALYZE, with the
// plan for the parameters and the generic plan, that the statement that
// claims the rows a group-limited claim chose reads those rows only (one
// seek of the primary key each), beside 20,000 due rows of the queue added
// after its statistics were taken when it held 100 live rows among 20,000
// finished ones (as in a drain): no scan of the live rows' entries in
// lq_jobs_kind_due for its due-time bound, no scan of the table.
func TestFlowPlanClaimChosenSeeksItsRows(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, grp, state)
SELECT 'q', 'a', 0, i, i, i, '\x7b7d', 'g' || (i % 1000), CASE WHEN i <= 100 THEN 0 ELSE 2 END FROM generate_series(1, 20000) i`,
		`ANALYZE lq_jobs `,
		`DELETE FROM lq_jobs WHERE state = 2`,
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, grp)
SELECT 'q', 'a', 0, i, i, i, '\x7b7d', 'g' || (i % 1000) FROM generate_series(101, 20100) i`,
	} {
		_, err := s.db.ExecContext(ctx, s.q(q))
		require.NoError(t, err)
	}
	ids := make([]int64, 400)
	for i := range ids {
		ids[i] = int64(25000 + 3*i)
	}
	for _, generic := range []bool{false, true} {
		plan := explainAnalyze(t, s.db, generic, s.q(claimChosenSQL), int64(900000), int64(7), int64(50000), ids, int64(9))
		rows, seq := rowsRead(plan)
		require.False(t, seq, "generic plan: %v: scans lq_jobs", generic)
		require.Equal(t, []string{"lq_jobs_pkey"}, indexesRead(plan), "generic plan: %v", generic)
		require.LessOrEqual(t, rows, float64(2*len(ids)+10), "generic plan: %v: reads %v rows of lq_jobs to claim %d", generic, rows, len(ids))
		t.Logf("generic plan: %v: %v rows of lq_jobs read to claim %d", generic, rows, len(ids))
	}
}

// indexesRead is the indexes the plan's nodes read, in plan order, each
// once.
func indexesRead(n planNode) []string {
	var out []string
	if n.Index != "" {
		out = append(out, n.Index)
	}
	for _, c := range n.Plans {
		for _, i := range indexesRead(c) {
			if !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	return out
}
