package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowResolutionReadsOnlyTheParentsEdges checks with EXPLAIN QUERY PLAN
// that resolving a finished parent reads lq_deps only through the parent's
// range of lq_deps_parent (or, for a child's own edges, its primary key)
// and lq_jobs only by primary key: a success costs its own children, never
// a scan of their siblings or of the jobs (a 10,000-parent fan-in stays
// linear).
func TestFlowResolutionReadsOnlyTheParentsEdges(t *testing.T) {
	s := openPlanStore(t)
	queries := []struct {
		name string
		sql  string
		args []any
	}{
		{"children met", flowMetSQL, []any{1, 2, 0}},
		{"children cancelled", flowCancelSQL, []any{1, 2, "why"}},
		{"edges marked done", flowDoneSQL, []any{2, 1, nil}},
		{"child's edges deleted", flowChildDoneSQL, []any{2}},
		{"parent succeeded", completeFlowDeleteSQL, []any{2, 7}},
		{"cancelled parents", `SELECT DISTINCT parent FROM lq_deps WHERE parent IN (SELECT value FROM json_each(?))`, []any{"[1,2]"}},
	}
	for _, qq := range queries {
		plan := queryPlan(t, s, qq.sql, qq.args...)
		for _, d := range plan {
			require.False(t, strings.HasPrefix(d, "SCAN lq_deps") || strings.HasPrefix(d, "SCAN lq_jobs"),
				"%s: %q scans a table; plan %q", qq.name, d, plan)
			if strings.Contains(d, "lq_deps") {
				require.True(t, strings.Contains(d, "lq_deps_parent (parent=?)") || strings.Contains(d, "PRIMARY KEY (child=?)"),
					"%s: %q reads lq_deps beyond one job's edges; plan %q", qq.name, d, plan)
			}
			if strings.HasPrefix(d, "SEARCH lq_jobs") {
				require.Contains(t, d, "INTEGER PRIMARY KEY", "%s: plan %q", qq.name, plan)
			}
		}
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
	}
}
