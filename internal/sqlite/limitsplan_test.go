package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowQueriesReadOnlyCountedRows checks with EXPLAIN QUERY PLAN that a
// limited claim counts what runs, and finds the next free slot, in a range
// of lq_jobs_flow (the counted running rows only), never through the live
// rows of the queue; and that its walk over due rows is a range of
// lq_jobs_kind_due.
func TestFlowQueriesReadOnlyCountedRows(t *testing.T) {
	s := openPlanStore(t)
	for _, qq := range []struct {
		name, sql, want string
		args            []any
	}{
		{"count running", flowRunningSQL, "lq_jobs_flow (queue=?", []any{"q", 1}},
		{"next free", flowNextFreeSQL, "lq_jobs_flow (queue=?", []any{"q", 1}},
		{"due rows with groups", dueGroupSQL, "lq_jobs_kind_due (queue=? AND priority=? AND kind=? AND visible_at<?)", []any{"q", 0, "a", 1, "[]"}},
	} {
		plan := queryPlan(t, s, qq.sql, qq.args...)
		found := false
		for _, d := range plan {
			if strings.Contains(d, "lq_jobs") && !strings.Contains(d, "json_each") {
				require.Contains(t, d, qq.want, "%s: plan %q", qq.name, plan)
				found = true
			}
		}
		require.True(t, found, "%s: plan %q", qq.name, plan)
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
	}
}
